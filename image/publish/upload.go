package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ebs"
	ebstypes "github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// EBS is the part of the EBS direct APIs client an upload calls.
type EBS interface {
	StartSnapshot(context.Context, *ebs.StartSnapshotInput, ...func(*ebs.Options)) (*ebs.StartSnapshotOutput, error)
	PutSnapshotBlock(context.Context, *ebs.PutSnapshotBlockInput, ...func(*ebs.Options)) (*ebs.PutSnapshotBlockOutput, error)
	CompleteSnapshot(context.Context, *ebs.CompleteSnapshotInput, ...func(*ebs.Options)) (*ebs.CompleteSnapshotOutput, error)
}

// UploadOptions tune an upload; the zero value is the defaults.
type UploadOptions struct {
	// Workers is how many blocks are in flight at once (default 8).
	Workers int
	// Attempts is how many times one block is sent before the upload
	// fails (default 8); Backoff the first wait between attempts, doubled
	// each time up to MaxBackoff (defaults 250 ms and 15 s), with jitter.
	Attempts            int
	Backoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one PutSnapshotBlock (default 2 minutes).
	AttemptTimeout time.Duration
	// TimeoutMinutes is StartSnapshot's Timeout: EBS turns a snapshot not
	// completed that long after it started to error (default 60).
	TimeoutMinutes int32
	// Progress, when set, gets a progress line once a second (a
	// rewritten line when Terminal, else a plain line every ProgressEvery,
	// default 10 s, so CI logs are not flooded).
	Progress      io.Writer
	Terminal      bool
	ProgressEvery time.Duration
	Log           *slog.Logger
}

func (o *UploadOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Attempts <= 0 {
		o.Attempts = 8
	}
	if o.Backoff <= 0 {
		o.Backoff = 250 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 15 * time.Second
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 2 * time.Minute
	}
	if o.TimeoutMinutes == 0 {
		o.TimeoutMinutes = 60
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 10 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Uploaded is what an upload did.
type Uploaded struct {
	SnapshotID string
	// Reused is set when StartSnapshot answered a snapshot an earlier
	// publish of the same disk completed: nothing was sent.
	Reused bool
	// Sent is how many blocks were written; Retries how many attempts
	// failed and were repeated.
	Sent, Retries int
}

// errChecksumEcho marks a block EBS acknowledged with another checksum
// than the one sent: it did not take the bytes that were sent.
var errChecksumEcho = errors.New("EBS acknowledged the block with another checksum than the one sent")

// Upload writes the planned blocks of disk (size bytes, p.Size) to a new
// EBS snapshot and completes it. Every attempt at a block sends the same
// bytes, read once, from a fresh reader.
func Upload(ctx context.Context, client EBS, disk io.ReaderAt, img Image, p Plan, o UploadOptions) (Uploaded, error) {
	o.defaults()
	start, err := client.StartSnapshot(ctx, StartInput(img, p, o.TimeoutMinutes))
	if err != nil {
		return Uploaded{}, fmt.Errorf("starting the EBS snapshot: %w", err)
	}
	id := aws.ToString(start.SnapshotId)
	res := Uploaded{SnapshotID: id}
	switch start.Status {
	case ebstypes.StatusCompleted:
		o.Log.Info("an earlier publish of this disk completed the snapshot; reusing it", "snapshot", id)
		res.Reused = true
		return res, nil
	case ebstypes.StatusError:
		return res, fmt.Errorf("snapshot %s, started by an earlier publish of this disk (ClientToken %s), is in the error state "+
			"(not completed within its Timeout?); delete it (aws ec2 delete-snapshot --snapshot-id %s) and publish with another -snapshot-timeout, "+
			"which starts a new one", id, ClientToken(img, p, o.TimeoutMinutes), id)
	}
	if bs := aws.ToInt32(start.BlockSize); bs != BlockSize {
		return res, fmt.Errorf("snapshot %s has block size %d, not %d", id, bs, BlockSize)
	}
	o.Log.Info("uploading", "snapshot", id, "blocks", len(p.Send), "bytes", p.SendBytes(), "holes_skipped", p.Skipped())

	digests := make([][sha256.Size]byte, len(p.Send))
	var done atomic.Int64
	var retries atomic.Int64
	stopProgress := startProgress(o, p.SendBytes(), &done)
	defer stopProgress()
	pool := sync.Pool{New: func() any { return make([]byte, BlockSize) }}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Workers)
	for n, idx := range p.Send {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // another block failed: the upload is over
			}
			buf := pool.Get().([]byte)
			defer pool.Put(buf)
			if err := readBlock(disk, p.Size, idx, buf); err != nil {
				return fmt.Errorf("reading block %d of %s: %w", idx, img.DiskPath, err)
			}
			digests[n] = sha256.Sum256(buf)
			sum := base64.StdEncoding.EncodeToString(digests[n][:])
			progress := int32(done.Load() * 100 / max(p.SendBytes(), 1))
			r, err := putBlock(gctx, client, id, idx, buf, sum, progress, o)
			retries.Add(int64(r))
			if err != nil {
				return err
			}
			done.Add(BlockSize)
			return nil
		})
	}
	err = g.Wait()
	res.Retries = int(retries.Load())
	if err != nil {
		return res, fmt.Errorf("uploading to snapshot %s: %w", id, err)
	}
	res.Sent = len(p.Send)
	stopProgress()
	_, err = client.CompleteSnapshot(ctx, &ebs.CompleteSnapshotInput{
		SnapshotId:                aws.String(id),
		ChangedBlocksCount:        aws.Int32(int32(len(p.Send))),
		Checksum:                  aws.String(LinearChecksum(digests)),
		ChecksumAlgorithm:         ebstypes.ChecksumAlgorithmChecksumAlgorithmSha256,
		ChecksumAggregationMethod: ebstypes.ChecksumAggregationMethodChecksumAggregationLinear,
	})
	if err != nil {
		return res, fmt.Errorf("completing snapshot %s (%d blocks sent): %w", id, len(p.Send), err)
	}
	return res, nil
}

// LinearChecksum is CompleteSnapshot's LINEAR aggregate, as coldsnap
// computes it: the base64 SHA-256 of the blocks' raw SHA-256 digests
// concatenated in block-index order (digests must be in that order).
func LinearChecksum(digests [][sha256.Size]byte) string {
	h := sha256.New()
	for _, d := range digests {
		h.Write(d[:])
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// readBlock fills buf with block idx of a disk of size bytes, the part
// past the end as zeros (EBS takes whole blocks only).
func readBlock(disk io.ReaderAt, size int64, idx int32, buf []byte) error {
	off := int64(idx) * BlockSize
	n := min(int64(BlockSize), size-off)
	if _, err := disk.ReadAt(buf[:n], off); err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return err
	}
	clear(buf[n:])
	return nil
}

// putBlock sends one block until it is taken, at most o.Attempts times;
// it returns how many attempts failed.
func putBlock(ctx context.Context, client EBS, id string, idx int32, block []byte, sum string, progress int32, o UploadOptions) (int, error) {
	for attempt := 1; ; attempt++ {
		err := putOnce(ctx, client, id, idx, block, sum, progress, o.AttemptTimeout)
		if err == nil {
			return attempt - 1, nil
		}
		if ctx.Err() != nil {
			return attempt - 1, ctx.Err()
		}
		if !Retryable(err) || attempt == o.Attempts {
			return attempt - 1, fmt.Errorf("block %d, attempt %d of %d: %w", idx, attempt, o.Attempts, err)
		}
		wait := Backoff(attempt, o.Backoff, o.MaxBackoff)
		o.Log.Debug("retrying a block", "index", idx, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return attempt, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func putOnce(ctx context.Context, client EBS, id string, idx int32, block []byte, sum string, progress int32, timeout time.Duration) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := client.PutSnapshotBlock(actx, &ebs.PutSnapshotBlockInput{
		SnapshotId: aws.String(id),
		BlockIndex: aws.Int32(idx),
		// A fresh reader per attempt over bytes that never change: the
		// SDK's own retryer would rewind a reader it was given once, and a
		// reused, drained one sends nothing (nanovms/ops #1268).
		BlockData:         bytes.NewReader(block),
		DataLength:        aws.Int32(BlockSize),
		Checksum:          aws.String(sum),
		ChecksumAlgorithm: ebstypes.ChecksumAlgorithmChecksumAlgorithmSha256,
		Progress:          aws.Int32(progress),
	}, func(o *ebs.Options) { o.RetryMaxAttempts = 1 })
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		return err
	}
	if got := aws.ToString(out.Checksum); got != "" && got != sum {
		return fmt.Errorf("%w (sent %s, acknowledged %s)", errChecksumEcho, sum, got)
	}
	return nil
}

// Retryable says whether a failed PutSnapshotBlock may succeed when the
// same bytes are sent again: throttling, 5xx, a transport failure or a
// timeout, and a checksum the service computed otherwise (the bytes were
// damaged on the way). Anything else (a bad index, a snapshot no longer
// pending, credentials) fails the same way every time.
func Retryable(err error) bool {
	if errors.Is(err, errChecksumEcho) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "RequestThrottledException", "ThrottlingException", "Throttling", "TooManyRequestsException",
			"InternalServerException", "InternalFailure", "ServiceUnavailable", "ServiceUnavailableException", "RequestTimeout", "RequestTimeoutException":
			return true
		case "ValidationException":
			var ve *ebstypes.ValidationException
			return errors.As(err, &ve) && ve.Reason == ebstypes.ValidationExceptionReasonInvalidBlock &&
				strings.Contains(strings.ToLower(ve.ErrorMessage()), "checksum")
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s == 429 || s >= 500
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Backoff is the wait before attempt+1: base doubled per attempt, capped,
// with full jitter in its upper half so that workers throttled together
// do not come back together.
func Backoff(attempt int, base, capped time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < capped; i++ {
		d *= 2
	}
	d = min(d, capped)
	return d/2 + rand.N(d/2+1)
}
