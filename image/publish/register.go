package publish

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// EC2 is the part of the EC2 client registration calls.
type EC2 interface {
	DescribeSnapshots(context.Context, *ec2.DescribeSnapshotsInput, ...func(*ec2.Options)) (*ec2.DescribeSnapshotsOutput, error)
	RegisterImage(context.Context, *ec2.RegisterImageInput, ...func(*ec2.Options)) (*ec2.RegisterImageOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DeleteSnapshot(context.Context, *ec2.DeleteSnapshotInput, ...func(*ec2.Options)) (*ec2.DeleteSnapshotOutput, error)
}

// RegisterOptions tune registration; the zero value is the defaults.
type RegisterOptions struct {
	// UEFIData is the base64 text of EC2's UEFI variable store (make
	// keys' uefi-data); empty registers an AMI with no Secure Boot keys.
	UEFIData string
	// SnapshotWait and ImageWait bound the waits for the snapshot to
	// complete and the image to be available (defaults 30 and 20 minutes).
	SnapshotWait, ImageWait time.Duration
	// Poll is the waiters' first delay between polls (default the SDK's
	// 15 s); they back off to 2 minutes.
	Poll time.Duration
	Log  *slog.Logger
}

func (o *RegisterOptions) defaults() {
	if o.SnapshotWait <= 0 {
		o.SnapshotWait = 30 * time.Minute
	}
	if o.ImageWait <= 0 {
		o.ImageWait = 20 * time.Minute
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func (o RegisterOptions) delays() (first, most time.Duration) {
	if o.Poll <= 0 {
		return 15 * time.Second, 120 * time.Second
	}
	return o.Poll, max(o.Poll, min(8*o.Poll, 120*time.Second))
}

// Registered is what registration did.
type Registered struct {
	ImageID string
	// Existed is set when an AMI of this name with this snapshot was
	// already registered (a retried publish).
	Existed bool
}

// Register waits for the snapshot to complete, registers it as an AMI and
// waits for the AMI to be available. When the AMI cannot be registered the
// snapshot is deleted, so a failed publish leaves nothing behind; once an
// AMI exists, it and its snapshot stay, and the error names them.
func Register(ctx context.Context, client EC2, img Image, snapshotID string, o RegisterOptions) (Registered, error) {
	o.defaults()
	minD, maxD := o.delays()
	o.Log.Info("waiting for the snapshot to complete", "snapshot", snapshotID, "deadline", o.SnapshotWait)
	sw := ec2.NewSnapshotCompletedWaiter(client, func(w *ec2.SnapshotCompletedWaiterOptions) { w.MinDelay, w.MaxDelay = minD, maxD })
	if err := sw.Wait(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{snapshotID}}, o.SnapshotWait); err != nil {
		return Registered{}, fmt.Errorf("waiting for snapshot %s to complete (deadline %s): %w%s", snapshotID, o.SnapshotWait, err, snapshotState(ctx, client, snapshotID))
	}
	name := AMIName(img)
	if ex, err := existing(ctx, client, name); err != nil {
		return Registered{}, err
	} else if ex != nil {
		if rootSnapshot(*ex) == snapshotID {
			o.Log.Info("the AMI was registered by an earlier publish of this disk", "ami", aws.ToString(ex.ImageId))
			return Registered{ImageID: aws.ToString(ex.ImageId), Existed: true}, nil
		}
		err := fmt.Errorf("an AMI named %q already exists (%s, of snapshot %s)", name, aws.ToString(ex.ImageId), rootSnapshot(*ex))
		return Registered{}, withDeletion(ctx, client, snapshotID, err)
	}
	out, err := client.RegisterImage(ctx, RegisterInput(img, snapshotID, o.UEFIData))
	if err != nil {
		return Registered{}, withDeletion(ctx, client, snapshotID, fmt.Errorf("registering snapshot %s as AMI %q: %w", snapshotID, name, err))
	}
	ami := aws.ToString(out.ImageId)
	o.Log.Info("registered; waiting for the AMI to be available", "ami", ami, "deadline", o.ImageWait)
	iw := ec2.NewImageAvailableWaiter(client, func(w *ec2.ImageAvailableWaiterOptions) { w.MinDelay, w.MaxDelay = minD, maxD })
	if err := iw.Wait(ctx, &ec2.DescribeImagesInput{ImageIds: []string{ami}}, o.ImageWait); err != nil {
		return Registered{ImageID: ami}, fmt.Errorf("AMI %s (snapshot %s) was registered but is not available (deadline %s): %w", ami, snapshotID, o.ImageWait, err)
	}
	return Registered{ImageID: ami}, nil
}

// withDeletion deletes the snapshot of a failed registration and says so
// in the error.
func withDeletion(ctx context.Context, client EC2, snapshotID string, cause error) error {
	// The caller's context may be what ended registration; the clean-up
	// gets its own minute.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := client.DeleteSnapshot(dctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(snapshotID)}); err != nil {
		return fmt.Errorf("%w; deleting snapshot %s failed too, delete it yourself (aws ec2 delete-snapshot --snapshot-id %s): %v", cause, snapshotID, snapshotID, err)
	}
	return fmt.Errorf("%w; snapshot %s was deleted", cause, snapshotID)
}

// snapshotState is the snapshot's state and message, for an error.
func snapshotState(ctx context.Context, client EC2, id string) string {
	out, err := client.DescribeSnapshots(context.WithoutCancel(ctx), &ec2.DescribeSnapshotsInput{SnapshotIds: []string{id}})
	if err != nil || len(out.Snapshots) != 1 {
		return ""
	}
	s := out.Snapshots[0]
	msg := fmt.Sprintf(" (state %s, progress %s", s.State, aws.ToString(s.Progress))
	if m := aws.ToString(s.StateMessage); m != "" {
		msg += ": " + m
	}
	return msg + ")"
}

// existing is the caller's AMI named name, or nil.
func existing(ctx context.Context, client EC2, name string) (*ec2types.Image, error) {
	out, err := client.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"},
		Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{name}}}})
	if err != nil {
		return nil, fmt.Errorf("looking for an AMI named %q: %w", name, err)
	}
	for i := range out.Images {
		if aws.ToString(out.Images[i].Name) == name {
			return &out.Images[i], nil
		}
	}
	return nil, nil
}

func rootSnapshot(im ec2types.Image) string {
	for _, m := range im.BlockDeviceMappings {
		if aws.ToString(m.DeviceName) == aws.ToString(im.RootDeviceName) && m.Ebs != nil {
			return aws.ToString(m.Ebs.SnapshotId)
		}
	}
	return ""
}
