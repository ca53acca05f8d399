package ebs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsebs "github.com/aws/aws-sdk-go-v2/service/ebs"
	"github.com/aws/aws-sdk-go-v2/service/ebs/types"
	"github.com/aws/smithy-go"

	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

var creds = sigv4.Credentials{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "secret", SessionToken: "session"}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }
func newClock() *clock               { return &clock{now: time.Now().UTC()} }
func client(u string, c sigv4.Credentials) *awsebs.Client {
	return awsebs.New(awsebs.Options{Region: "eu-west-1", BaseEndpoint: aws.String(u), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)})
}

func start(t *testing.T, cfg Config) (*Server, *awsebs.Client, *clock) {
	s, c, clk, _ := startURL(t, cfg)
	return s, c, clk
}

func startURL(t *testing.T, cfg Config) (*Server, *awsebs.Client, *clock, string) {
	t.Helper()
	clk := newClock()
	cfg.Credentials, cfg.Region, cfg.Account, cfg.Clock = creds, "eu-west-1", "111122223333", clk.Now
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, stop, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, client(u, creds), clk, u
}

func block(fill byte) []byte { return bytes.Repeat([]byte{fill}, BlockSize) }

func sum(b []byte) string { h := sha256.Sum256(b); return base64.StdEncoding.EncodeToString(h[:]) }

func put(ctx context.Context, c *awsebs.Client, id string, i int32, data []byte, checksum string) error {
	_, err := c.PutSnapshotBlock(ctx, &awsebs.PutSnapshotBlockInput{SnapshotId: aws.String(id), BlockIndex: aws.Int32(i),
		BlockData: bytes.NewReader(data), DataLength: aws.Int32(int32(len(data))), Checksum: aws.String(checksum),
		ChecksumAlgorithm: types.ChecksumAlgorithmChecksumAlgorithmSha256, Progress: aws.Int32(50)})
	return err
}

func startSnap(t *testing.T, c *awsebs.Client, token, desc string) *awsebs.StartSnapshotOutput {
	t.Helper()
	out, err := c.StartSnapshot(context.Background(), &awsebs.StartSnapshotInput{VolumeSize: aws.Int64(1), ClientToken: aws.String(token),
		Description: aws.String(desc), Timeout: aws.Int32(60), Tags: []types.Tag{{Key: aws.String("berth:version"), Value: aws.String("v1")}}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apiErr asserts err is the named AWS error (and reason, when given).
func apiErr(t *testing.T, what string, err error, code, reason string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
	if reason == "" {
		return
	}
	var got string
	var ve *types.ValidationException
	var nf *types.ResourceNotFoundException
	var th *types.RequestThrottledException
	switch {
	case errors.As(err, &ve):
		got = string(ve.Reason)
	case errors.As(err, &nf):
		got = string(nf.Reason)
	case errors.As(err, &th):
		got = string(th.Reason)
	}
	if got != reason {
		t.Fatalf("%s: reason %q, want %q (%v)", what, got, reason, err)
	}
}

func TestSnapshotThroughSDK(t *testing.T) {
	s, c, _ := start(t, Config{})
	ctx := context.Background()
	out := startSnap(t, c, "token-1", "berth v1")
	if out.Status != types.StatusPending || aws.ToInt32(out.BlockSize) != BlockSize || aws.ToInt64(out.VolumeSize) != 1 ||
		aws.ToString(out.OwnerId) != "111122223333" || aws.ToString(out.Description) != "berth v1" || out.StartTime == nil || len(out.Tags) != 1 {
		t.Fatalf("StartSnapshot answered %+v", out)
	}
	id := aws.ToString(out.SnapshotId)
	a, b, z := block(0xa1), block(0xb2), block(0)
	for i, d := range map[int32][]byte{0: block(0xff), 7: b, 2047: z} {
		if err := put(ctx, c, id, i, d, sum(d)); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
	}
	// Re-sent, index 0 is overwritten.
	if err := put(ctx, c, id, 0, a, sum(a)); err != nil {
		t.Fatal(err)
	}
	digests := map[int32][32]byte{0: sha256.Sum256(a), 7: sha256.Sum256(b), 2047: sha256.Sum256(z)}
	linear := LinearChecksum(digests)
	// The LINEAR checksum by hand: the raw digests in index order.
	var cat []byte
	for _, d := range [][]byte{a, b, z} {
		h := sha256.Sum256(d)
		cat = append(cat, h[:]...)
	}
	if linear != sum(cat) {
		t.Fatalf("LinearChecksum %s, by hand %s", linear, sum(cat))
	}
	complete := func(n int32, checksum, method string) error {
		_, err := c.CompleteSnapshot(ctx, &awsebs.CompleteSnapshotInput{SnapshotId: aws.String(id), ChangedBlocksCount: aws.Int32(n),
			Checksum: aws.String(checksum), ChecksumAlgorithm: types.ChecksumAlgorithmChecksumAlgorithmSha256, ChecksumAggregationMethod: types.ChecksumAggregationMethod(method)})
		return err
	}
	apiErr(t, "miscount (4 for 3 distinct blocks)", complete(4, linear, "LINEAR"), "ValidationException", "INVALID_PARAMETER_VALUE")
	apiErr(t, "aggregate over other blocks", complete(3, sum(cat[:64]), "LINEAR"), "ValidationException", "INVALID_PARAMETER_VALUE")
	apiErr(t, "aggregation method", complete(3, linear, "TREE"), "ValidationException", "INVALID_PARAMETER_VALUE")
	if err := complete(3, linear, "LINEAR"); err != nil {
		t.Fatalf("CompleteSnapshot: %v", err)
	}
	sn, ok := s.Lookup(id)
	if !ok || sn.State != StateCompleted || sn.ChangedBlocks != 3 || sn.Progress != 100 {
		t.Fatalf("after completion %+v", sn)
	}
	apiErr(t, "write after completion", put(ctx, c, id, 1, a, sum(a)), "ValidationException", "INVALID_SNAPSHOT_ID")
	vol, err := s.Volume(id, 8*BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.BlockIndexes(id); len(got) != 3 || got[2] != 2047 {
		t.Fatalf("stored blocks %v, want 0 7 2047", got)
	}
	want := make([]byte, 8*BlockSize)
	copy(want, a)
	copy(want[7*BlockSize:], b)
	if !bytes.Equal(vol, want) {
		t.Fatal("the volume does not read back the blocks written")
	}
	// The same token and request: the same snapshot, now completed.
	again := startSnap(t, c, "token-1", "berth v1")
	if aws.ToString(again.SnapshotId) != id || again.Status != types.StatusCompleted {
		t.Fatalf("retried StartSnapshot: %s %s, want %s completed", aws.ToString(again.SnapshotId), again.Status, id)
	}
	_, err = c.StartSnapshot(ctx, &awsebs.StartSnapshotInput{VolumeSize: aws.Int64(2), ClientToken: aws.String("token-1")})
	apiErr(t, "same token, other request", err, "ConflictException", "")
}

func TestPutSnapshotBlockChecks(t *testing.T) {
	s, c, _, u := startURL(t, Config{})
	ctx := context.Background()
	id := aws.ToString(startSnap(t, c, "t", "d").SnapshotId)
	a := block(1)
	apiErr(t, "unknown snapshot", put(ctx, c, "snap-0123456789abcdef0", 0, a, sum(a)), "ResourceNotFoundException", "SNAPSHOT_NOT_FOUND")
	apiErr(t, "index past a 1 GiB volume", put(ctx, c, id, 2048, a, sum(a)), "ValidationException", "INVALID_BLOCK")
	apiErr(t, "checksum of other bytes", put(ctx, c, id, 0, a, sum(block(2))), "ValidationException", "INVALID_BLOCK")
	short := a[:4096]
	apiErr(t, "a 4 KiB block", put(ctx, c, id, 0, short, sum(short)), "ValidationException", "INVALID_PARAMETER_VALUE")
	// A data length that is not the body's.
	_, err := c.PutSnapshotBlock(ctx, &awsebs.PutSnapshotBlockInput{SnapshotId: aws.String(id), BlockIndex: aws.Int32(0),
		BlockData: bytes.NewReader(a[:BlockSize-1]), DataLength: aws.Int32(BlockSize), Checksum: aws.String(sum(a)), ChecksumAlgorithm: types.ChecksumAlgorithmChecksumAlgorithmSha256})
	apiErr(t, "a body shorter than x-amz-Data-Length", err, "ValidationException", "INVALID_PARAMETER_VALUE")
	if got := s.BlockIndexes(id); len(got) != 0 {
		t.Fatalf("rejected blocks were stored: %v", got)
	}
	// Wrong secret: the signature does not match.
	bad := client(u, sigv4.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: "other", SessionToken: creds.SessionToken})
	apiErr(t, "bad signature", put(ctx, bad, id, 0, a, sum(a)), "InvalidSignatureException", "")
}

func TestStartSnapshotChecks(t *testing.T) {
	_, c, _ := start(t, Config{})
	ctx := context.Background()
	for name, in := range map[string]*awsebs.StartSnapshotInput{
		"0 GiB":            {VolumeSize: aws.Int64(0)},
		"65 TiB":           {VolumeSize: aws.Int64(65 << 10)},
		"timeout 5 min":    {VolumeSize: aws.Int64(1), Timeout: aws.Int32(5)},
		"timeout 4321 min": {VolumeSize: aws.Int64(1), Timeout: aws.Int32(4321)},
		"aws: tag":         {VolumeSize: aws.Int64(1), Tags: []types.Tag{{Key: aws.String("aws:x"), Value: aws.String("v")}}},
	} {
		_, err := c.StartSnapshot(ctx, in)
		apiErr(t, name, err, "ValidationException", "INVALID_PARAMETER_VALUE")
	}
}

func TestTimeoutTurnsSnapshotToError(t *testing.T) {
	s, c, clk, u := startURL(t, Config{})
	ctx := context.Background()
	id := aws.ToString(startSnap(t, c, "t", "d").SnapshotId)
	a := block(3)
	if err := put(ctx, c, id, 0, a, sum(a)); err != nil {
		t.Fatal(err)
	}
	clk.Add(61 * time.Minute)
	// The SDK signs with the wall clock, which the stand-in's is now an
	// hour past: this request is signed at the stand-in's time.
	req, err := http.NewRequest(http.MethodPut, u+"/snapshots/"+id+"/blocks/1", bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-amz-Data-Length", "524288")
	req.Header.Set("x-amz-Checksum", sum(a))
	req.Header.Set("x-amz-Checksum-Algorithm", "SHA256")
	req.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	if err := v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.SessionToken},
		req, sigv4.UnsignedPayload, "ebs", "eu-west-1", clk.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-Errortype") != "ValidationException" || !strings.Contains(string(body), "INVALID_SNAPSHOT_ID") {
		t.Fatalf("write after the Timeout: %d %s", resp.StatusCode, body)
	}
	sn, _ := s.Lookup(id)
	if sn.State != StateError || sn.StateReason == "" {
		t.Fatalf("after the Timeout: %+v", sn)
	}
}

func TestInjectedFaults(t *testing.T) {
	s, c, _ := start(t, Config{})
	ctx := context.Background()
	id := aws.ToString(startSnap(t, c, "t", "d").SnapshotId)
	a := block(4)
	s.Inject(OpPut, 5, Fault{Kind: FaultThrottle}, Fault{Kind: FaultServer}, Fault{Kind: FaultChecksum}, Fault{Kind: FaultHang, Hold: 10 * time.Millisecond})
	apiErr(t, "throttled", put(ctx, c, id, 5, a, sum(a)), "RequestThrottledException", "ACCOUNT_THROTTLED")
	apiErr(t, "5xx", put(ctx, c, id, 5, a, sum(a)), "InternalServerException", "")
	apiErr(t, "checksum", put(ctx, c, id, 5, a, sum(a)), "ValidationException", "INVALID_BLOCK")
	apiErr(t, "hang", put(ctx, c, id, 5, a, sum(a)), "InternalServerException", "")
	s.Inject(OpPut, -1, Fault{Kind: FaultEchoChecksum})
	out, err := c.PutSnapshotBlock(ctx, &awsebs.PutSnapshotBlockInput{SnapshotId: aws.String(id), BlockIndex: aws.Int32(6),
		BlockData: bytes.NewReader(a), DataLength: aws.Int32(BlockSize), Checksum: aws.String(sum(a)), ChecksumAlgorithm: types.ChecksumAlgorithmChecksumAlgorithmSha256})
	if err != nil || aws.ToString(out.Checksum) == sum(a) {
		t.Fatalf("echo-checksum fault: %v %+v", err, out)
	}
	if err := put(ctx, c, id, 5, a, sum(a)); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	at := s.Attempts(id, 5)
	if len(at) != 5 {
		t.Fatalf("attempts %+v", at)
	}
	h := sha256.Sum256(a)
	for i, x := range at {
		if x.Len != BlockSize || x.SHA256 != hex.EncodeToString(h[:]) {
			t.Errorf("attempt %d: %+v", i, x)
		}
	}
	if at[0].Code != "RequestThrottledException" || at[4].Status != 201 {
		t.Fatalf("attempt answers %+v", at)
	}
	if got := s.BlockIndexes(id); len(got) != 1 || got[0] != 5 {
		t.Fatalf("stored %v, want only block 5", got)
	}
}
