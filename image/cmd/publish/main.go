// Command publish makes an AMI of the disk `make disk` built: it uploads
// build/image/disk.raw as an EBS snapshot through the EBS direct APIs and
// registers it (UEFI, TPM 2.0, IMDSv2 only, ENA, gp3 root at /dev/xvda),
// with the Secure Boot keys of build/keys/uefi-data when present. Region
// and credentials come from the standard AWS configuration chain
// (AWS_REGION, AWS_PROFILE, ~/.aws, SSO, instance roles...); the endpoints
// from AWS_ENDPOINT_URL_EBS and AWS_ENDPOINT_URL_EC2 when set. It prints
// the AMI ID on stdout and everything else on stderr. It is `make publish`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"golang.org/x/sys/unix"

	"github.com/berth-node/berth/image/publish"
)

const defaultUEFIData = "build/keys/uefi-data"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("publish", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("image", "build/image", "the image directory: manifest.json and the disk it names (make disk)")
	uefiPath := flags.String("uefi-data", defaultUEFIData, "EC2 uefi-data file (base64, make keys) with the Secure Boot keys; \"none\" for none (Secure Boot off)")
	workers := flags.Int("workers", 8, "blocks uploaded at once")
	region := flags.String("region", "", "AWS region (default: the AWS configuration chain: AWS_REGION, the profile)")
	dryRun := flags.Bool("dry-run", false, "read the disk and print the upload plan; call nothing")
	timeout := flags.Int("snapshot-timeout", 60, "minutes EBS waits for the upload to complete before it fails the snapshot (10-4320)")
	verbose := flags.Bool("v", false, "log each step and retry")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	if *workers < 1 || *workers > 64 {
		return fmt.Errorf("-workers %d: want 1..64", *workers)
	}
	if *timeout < 10 || *timeout > 4320 {
		return fmt.Errorf("-snapshot-timeout %d: EBS takes 10..4320 minutes", *timeout)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	img, err := publish.LoadImage(*dir)
	if err != nil {
		return err
	}
	f, err := os.Open(img.DiskPath)
	if err != nil {
		return fmt.Errorf("opening the disk: %w", err)
	}
	defer f.Close()
	ext, err := publish.DataExtents(f, img.Size)
	if err != nil {
		return err
	}
	p, err := publish.NewPlan(img.Size, ext)
	if err != nil {
		return fmt.Errorf("%s: %w", img.DiskPath, err)
	}
	fmt.Fprintf(stderr, "%s: berth %s (%s), %d bytes, sha256 %s\n", img.DiskPath, img.Version, img.Arch, img.Size, img.SHA256)
	fmt.Fprintf(stderr, "plan: %d GiB snapshot, %d blocks of 512 KiB: %d to send (%.1f MiB), %d skipped as holes\n",
		p.VolumeGiB, p.Blocks, len(p.Send), float64(p.SendBytes())/(1<<20), p.Skipped())
	fmt.Fprintf(stderr, "AMI name: %s\n", publish.AMIName(img))

	uefi := ""
	switch _, serr := os.Stat(*uefiPath); {
	case *uefiPath == "" || *uefiPath == "none":
		fmt.Fprintln(stderr, "no -uefi-data: the AMI has no Secure Boot keys (EC2's default UEFI variables; Secure Boot off)")
	case errors.Is(serr, fs.ErrNotExist) && *uefiPath == defaultUEFIData:
		fmt.Fprintf(stderr, "no %s (make keys writes it): the AMI has no Secure Boot keys (EC2's default UEFI variables; Secure Boot off)\n", *uefiPath)
	default:
		if uefi, err = publish.LoadUEFIData(*uefiPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "Secure Boot keys: %s\n", *uefiPath)
	}
	if err := publish.CheckKeys(img, uefi); err != nil {
		return err
	}
	if *dryRun {
		return nil
	}

	var opts []func(*config.LoadOptions) error
	if *region != "" {
		opts = append(opts, config.WithRegion(*region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return errors.New("no AWS region: pass -region or set AWS_REGION (or a region in your AWS profile)")
	}
	fmt.Fprintf(stderr, "region %s\n", cfg.Region)
	began := time.Now()
	up, err := publish.Upload(ctx, ebs.NewFromConfig(cfg), f, img, p, publish.UploadOptions{
		Workers: *workers, TimeoutMinutes: int32(*timeout), Progress: stderr, Terminal: isTerminal(stderr), Log: log,
	})
	if err != nil {
		return err
	}
	if up.Reused {
		fmt.Fprintf(stderr, "snapshot %s: completed by an earlier publish of this disk, reused\n", up.SnapshotID)
	} else {
		fmt.Fprintf(stderr, "snapshot %s: %d blocks sent in %s (%d retried)\n", up.SnapshotID, up.Sent, time.Since(began).Round(time.Second), up.Retries)
	}
	reg, err := publish.Register(ctx, ec2.NewFromConfig(cfg), img, up.SnapshotID, publish.RegisterOptions{UEFIData: uefi, Log: log})
	if err != nil {
		return err
	}
	if reg.Existed {
		fmt.Fprintf(stderr, "AMI %s was registered by an earlier publish of this disk\n", reg.ImageID)
	} else {
		fmt.Fprintf(stderr, "AMI %s is available in %s (%s in all)\n", reg.ImageID, cfg.Region, time.Since(began).Round(time.Second))
	}
	fmt.Fprintln(stdout, reg.ImageID)
	return nil
}

// isTerminal says whether w is a terminal, where a progress line is
// rewritten in place rather than printed anew.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
