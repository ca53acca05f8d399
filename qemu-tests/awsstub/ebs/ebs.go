// Package ebs is a stand-in for the EBS direct APIs that write a snapshot:
// StartSnapshot, PutSnapshotBlock and CompleteSnapshot, as `make publish`
// calls them. It speaks their REST-JSON protocol (POST /snapshots, PUT
// /snapshots/{id}/blocks/{index}, POST /snapshots/completion/{id}; the
// x-amz-Data-Length, x-amz-Checksum* and x-amz-Progress headers), verifies
// SigV4 for service "ebs" (PutSnapshotBlock's body is UNSIGNED-PAYLOAD, as
// the SDK sends it) and enforces what EBS enforces: the snapshot exists and
// is pending, the block index is inside the volume, every block is 512 KiB
// with a matching SHA-256, a re-sent index overwrites, ChangedBlocksCount
// and the LINEAR aggregate checksum match what was written, no write after
// completion, the Timeout turns an uncompleted snapshot to error, and a
// ClientToken answers the same snapshot (a different request with the same
// token is a ConflictException). Errors are EBS's: a status, X-Amzn-Errortype
// and {"Message", "Reason"}. Faults (bad checksums, 5xx, throttling, a
// hang) are injected per request for the client's retry tests.
//
// The EC2 stand-in (awsstub/ec2) reads the snapshots written here, as
// EC2's DescribeSnapshots sees snapshots the EBS direct APIs made.
package ebs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// BlockSize is the only block size EBS snapshots have.
const BlockSize = 512 << 10

// BlocksPerGiB is how many blocks one GiB of VolumeSize holds.
const BlocksPerGiB = (1 << 30) / BlockSize

// Timeout bounds, in minutes (StartSnapshot's Timeout; 60 when absent).
const (
	MinTimeout     = 10
	MaxTimeout     = 4320
	DefaultTimeout = 60
)

// MaxVolumeSize is EBS's largest snapshot, in GiB (64 TiB).
const MaxVolumeSize = 64 << 10

// Snapshot states, as EBS and EC2 name them.
const (
	StatePending   = "pending"
	StateCompleted = "completed"
	StateError     = "error"
)

// Tag is one snapshot tag.
type Tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// StartRequest is StartSnapshot's JSON body.
type StartRequest struct {
	VolumeSize       *int64 `json:"VolumeSize"`
	ParentSnapshotID string `json:"ParentSnapshotId,omitempty"`
	Tags             []Tag  `json:"Tags,omitempty"`
	Description      string `json:"Description,omitempty"`
	ClientToken      string `json:"ClientToken,omitempty"`
	Encrypted        *bool  `json:"Encrypted,omitempty"`
	KmsKeyArn        string `json:"KmsKeyArn,omitempty"`
	Timeout          *int32 `json:"Timeout,omitempty"`
}

func (r StartRequest) timeout() int32 {
	if r.Timeout == nil {
		return DefaultTimeout
	}
	return *r.Timeout
}

// ParseStart decodes and checks a StartSnapshot body as EBS does.
func ParseStart(body []byte) (StartRequest, error) {
	var in StartRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return in, fmt.Errorf("body is not a StartSnapshot request: %v", err)
	}
	if in.VolumeSize == nil {
		return in, fmt.Errorf("VolumeSize is required")
	}
	if *in.VolumeSize < 1 || *in.VolumeSize > MaxVolumeSize {
		return in, fmt.Errorf("VolumeSize %d GiB is outside 1..%d", *in.VolumeSize, MaxVolumeSize)
	}
	if in.Timeout != nil && (*in.Timeout < MinTimeout || *in.Timeout > MaxTimeout) {
		return in, fmt.Errorf("Timeout %d minutes is outside %d..%d", *in.Timeout, MinTimeout, MaxTimeout)
	}
	if len(in.Description) > 255 {
		return in, fmt.Errorf("Description is %d characters, at most 255", len(in.Description))
	}
	if len(in.ClientToken) > 255 {
		return in, fmt.Errorf("ClientToken is %d characters, at most 255", len(in.ClientToken))
	}
	for i, t := range in.Tags {
		if t.Key == "" || len(t.Key) > 127 || len(t.Value) > 255 || strings.HasPrefix(t.Key, "aws:") {
			return in, fmt.Errorf("Tags[%d]: key %q value %q: a key of 1-127 characters not starting aws:, a value up to 255", i, t.Key, t.Value)
		}
	}
	if in.ParentSnapshotID != "" {
		return in, fmt.Errorf("ParentSnapshotId: incremental snapshots are not supported by this stand-in")
	}
	return in, nil
}

// Attempt is one PutSnapshotBlock request as received, kept so tests can
// prove every retry carried the same bytes.
type Attempt struct {
	// SHA256 is the hex digest of the body received, Len its length.
	SHA256 string
	Len    int
	// Status and Code are the answer (Code empty on success).
	Status int
	Code   string
}

// Snapshot is one snapshot's state, as Snapshots and Lookup return it.
type Snapshot struct {
	ID          string
	OwnerID     string
	State       string
	StateReason string
	VolumeSize  int64
	Description string
	Tags        []Tag
	StartTime   time.Time
	Timeout     time.Duration
	// ChangedBlocks is CompleteSnapshot's count once completed.
	ChangedBlocks int
	// Progress is the last x-amz-Progress sent (0-100).
	Progress int
}

type snapshot struct {
	Snapshot
	request StartRequest
	blocks  map[int32][]byte
	// digests are the raw SHA-256 of each stored block, for LINEAR.
	digests map[int32][32]byte
	// completing is when a completed snapshot turns completed.
	completing time.Time
}

// FaultKind is what an injected fault makes the stand-in answer.
type FaultKind int

const (
	// FaultChecksum answers a ValidationException, as EBS does when the
	// body it received does not hash to x-amz-Checksum (a corrupted
	// transfer); the block is not stored.
	FaultChecksum FaultKind = iota + 1
	// FaultEchoChecksum stores nothing but answers 201 with another
	// x-amz-Checksum than the client's: a client must see that the bytes
	// the service took are not the bytes it sent.
	FaultEchoChecksum
	// FaultServer answers 500 InternalServerException.
	FaultServer
	// FaultThrottle answers RequestThrottledException.
	FaultThrottle
	// FaultHang holds the request until the client gives up (or Hold
	// passes) and answers 500 then.
	FaultHang
)

// Fault is one injected answer.
type Fault struct {
	Kind FaultKind
	// Hold is how long FaultHang holds (default 1 minute).
	Hold time.Duration
}

// Op names the operations for Inject.
type Op string

const (
	OpStart    Op = "StartSnapshot"
	OpPut      Op = "PutSnapshotBlock"
	OpComplete Op = "CompleteSnapshot"
)

// Config configures the stand-in.
type Config struct {
	Credentials sigv4.Credentials
	Region      string
	Account     string
	// CompleteAfter is how long a completed snapshot stays pending before
	// it is completed (EBS finishes it asynchronously); 0 completes it at once.
	CompleteAfter time.Duration
	// Minute is how long one minute of StartSnapshot's Timeout lasts
	// (default a minute): a test shortens it to see a snapshot time out
	// without moving the clock SigV4 checks signatures against.
	Minute time.Duration
	Clock  func() time.Time
	Logger *slog.Logger
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	cfg   Config
	clock func() time.Time
	log   *slog.Logger
	reqs  serve.Log

	mu        sync.Mutex
	snapshots map[string]*snapshot
	byToken   map[string]string
	// faults are pending injected answers per operation and block index
	// (-1: any index / not a block call), consumed in order.
	faults   map[faultKey][]Fault
	attempts map[string]map[int32][]Attempt
	deleted  map[string]bool
}

type faultKey struct {
	op    Op
	index int32
}

// New checks cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, fmt.Errorf("ebs stand-in: Credentials.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Region == "" || cfg.Account == "" {
		return nil, fmt.Errorf("ebs stand-in: Region and Account are required")
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger),
		snapshots: map[string]*snapshot{}, byToken: map[string]string{}, faults: map[faultKey][]Fault{},
		attempts: map[string]map[int32][]Attempt{}, deleted: map[string]bool{}}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.cfg.Minute <= 0 {
		s.cfg.Minute = time.Minute
	}
	return s, nil
}

// Start serves s over plain HTTP on addr (AWS_ENDPOINT_URL_EBS).
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("ebs stand-in", addr, s, nil, s.log)
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Inject queues faults for op; for OpPut, index picks the block (-1: the
// next PutSnapshotBlock of any block). Each fault answers one request.
func (s *Server) Inject(op Op, index int32, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := faultKey{op, index}
	s.faults[k] = append(s.faults[k], faults...)
}

func (s *Server) takeFault(op Op, index int32) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []faultKey{{op, index}, {op, -1}} {
		if q := s.faults[k]; len(q) > 0 {
			s.faults[k] = q[1:]
			return q[0], true
		}
	}
	return Fault{}, false
}

// Attempts returns every PutSnapshotBlock request received for a block.
func (s *Server) Attempts(id string, index int32) []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attempts[id][index])
}

// Lookup returns a snapshot's state, its Timeout applied.
func (s *Server) Lookup(id string) (Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok {
		return Snapshot{}, false
	}
	s.advance(sn)
	return sn.Snapshot, true
}

// Snapshots returns every snapshot, by ID order.
func (s *Server) Snapshots() []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Snapshot
	for _, sn := range s.snapshots {
		s.advance(sn)
		out = append(out, sn.Snapshot)
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Delete removes a snapshot (EC2's DeleteSnapshot); false if unknown.
func (s *Server) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.snapshots[id]; !ok {
		return false
	}
	delete(s.snapshots, id)
	s.deleted[id] = true
	return true
}

// Volume reassembles a snapshot as the volume made from it reads: the
// blocks written, zeros elsewhere (size bytes from the start).
func (s *Server) Volume(id string, size int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok {
		return nil, fmt.Errorf("no snapshot %s", id)
	}
	if size > sn.VolumeSize<<30 {
		return nil, fmt.Errorf("snapshot %s is %d GiB, not %d bytes", id, sn.VolumeSize, size)
	}
	out := make([]byte, size)
	for i, b := range sn.blocks {
		off := int64(i) * BlockSize
		if off < size {
			copy(out[off:], b)
		}
	}
	return out, nil
}

// BlockIndexes returns the indexes stored in a snapshot, sorted.
func (s *Server) BlockIndexes(id string) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots[id]
	if !ok {
		return nil
	}
	var out []int32
	for i := range sn.blocks {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// advance applies the clock: the Timeout's passing turns a pending,
// uncompleted snapshot to error; a completion's delay to completed.
func (s *Server) advance(sn *snapshot) {
	if sn.State != StatePending {
		return
	}
	now := s.clock()
	if sn.ChangedBlocks >= 0 && !sn.completing.IsZero() {
		if !now.Before(sn.completing) {
			sn.State = StateCompleted
			sn.Progress = 100
		}
		return
	}
	if now.After(sn.StartTime.Add(sn.Timeout)) {
		sn.State = StateError
		sn.StateReason = fmt.Sprintf("the snapshot was not completed within its Timeout of %d minutes", sn.request.timeout())
	}
}

// ebsCodes are the error types EBS answers for sigv4's failures.
var ebsCodes = map[string]struct {
	code   string
	status int
}{
	sigv4.CodeIncompleteSignature:   {"IncompleteSignatureException", 400},
	sigv4.CodeMissingAuthentication: {"MissingAuthenticationTokenException", 403},
	sigv4.CodeInvalidClientTokenID:  {"UnrecognizedClientException", 403},
	sigv4.CodeSignatureDoesNotMatch: {"InvalidSignatureException", 403},
	sigv4.CodeExpiredToken:          {"ExpiredTokenException", 403},
}

// ErrorBody is EBS's error body.
type ErrorBody struct {
	Message string `json:"Message"`
	Reason  string `json:"Reason,omitempty"`
}

// apiError is an answer that is not a success.
type apiError struct {
	status       int
	code, reason string
	msg          string
}

func validation(reason, format string, args ...any) *apiError {
	return &apiError{status: 400, code: "ValidationException", reason: reason, msg: fmt.Sprintf(format, args...)}
}

func notFound(id string) *apiError {
	return &apiError{status: 404, code: "ResourceNotFoundException", reason: "SNAPSHOT_NOT_FOUND", msg: "The snapshot '" + id + "' does not exist."}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, code := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: r.URL.Path, Status: status, Code: code})
	s.log.Debug("ebs stand-in", "method", r.Method, "path", r.URL.Path, "status", status, "code", code)
}

// Route is a request's operation and path labels, from ParseRoute.
type Route struct {
	Op         Op
	SnapshotID string
	Index      int32
}

// ParseRoute maps a method and escaped path to an operation, as EBS's
// REST bindings do; it fails for anything else.
func ParseRoute(method, path string) (Route, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case method == http.MethodPost && len(parts) == 1 && parts[0] == "snapshots":
		return Route{Op: OpStart}, nil
	case method == http.MethodPost && len(parts) == 3 && parts[0] == "snapshots" && parts[1] == "completion" && validID(parts[2]):
		return Route{Op: OpComplete, SnapshotID: parts[2]}, nil
	case method == http.MethodPut && len(parts) == 4 && parts[0] == "snapshots" && validID(parts[1]) && parts[2] == "blocks":
		i, err := strconv.ParseInt(parts[3], 10, 32)
		if err != nil || i < 0 || parts[3] != strconv.FormatInt(i, 10) {
			return Route{}, fmt.Errorf("block index %q is not an integer 0..%d", parts[3], int32(^uint32(0)>>1))
		}
		return Route{Op: OpPut, SnapshotID: parts[1], Index: int32(i)}, nil
	}
	return Route{}, fmt.Errorf("%s %s is not StartSnapshot, PutSnapshotBlock or CompleteSnapshot", method, path)
}

// validID is EBS's snapshot ID pattern: snap-, then hex.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "snap-")
	if !ok || rest == "" || len(rest) > 17 {
		return false
	}
	_, err := hex.DecodeString(strings.Repeat("0", len(rest)%2) + rest)
	return err == nil && strings.ToLower(rest) == rest
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	route, err := ParseRoute(r.Method, r.URL.EscapedPath())
	if err != nil {
		return writeError(w, &apiError{status: 404, code: "UnknownOperationException", msg: err.Error()})
	}
	limit := int64(64 << 10)
	if route.Op == OpPut {
		limit = BlockSize
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return writeError(w, validation("INVALID_PARAMETER_VALUE", "reading the body: %v", err))
	}
	if int64(len(body)) > limit {
		return writeError(w, validation("INVALID_PARAMETER_VALUE", "the body is larger than %d bytes", limit))
	}
	if _, verr := sigv4.VerifyHeader(r, body, sigv4.Static(s.cfg.Credentials), sigv4.Expect{Service: "ebs", Region: s.cfg.Region, Now: s.clock()}); verr != nil {
		c := ebsCodes[verr.Code]
		return writeError(w, &apiError{status: c.status, code: c.code, msg: verr.Message})
	}
	if f, ok := s.takeFault(route.Op, route.Index); ok {
		if e := s.fault(w, r, route, body, f); e != nil {
			return writeError(w, e)
		}
		return http.StatusCreated, ""
	}
	switch route.Op {
	case OpStart:
		return s.start(w, body)
	case OpPut:
		return s.put(w, r, route, body)
	default:
		return s.complete(w, r, route)
	}
}

// fault answers an injected fault; nil means it answered a success itself.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, route Route, body []byte, f Fault) *apiError {
	s.record(route, body, 0, "")
	switch f.Kind {
	case FaultChecksum:
		s.relabel(route, 400, "ValidationException")
		return validation("INVALID_BLOCK", "The checksum of the block data does not match the x-amz-Checksum header.")
	case FaultEchoChecksum:
		s.relabel(route, 201, "")
		w.Header().Set("x-amz-Checksum", base64.StdEncoding.EncodeToString(make([]byte, sha256.Size)))
		w.Header().Set("x-amz-Checksum-Algorithm", "SHA256")
		w.WriteHeader(http.StatusCreated)
		return nil
	case FaultThrottle:
		s.relabel(route, 400, "RequestThrottledException")
		return &apiError{status: 400, code: "RequestThrottledException", reason: "ACCOUNT_THROTTLED", msg: "The request was denied due to request throttling."}
	case FaultHang:
		hold := f.Hold
		if hold == 0 {
			hold = time.Minute
		}
		select {
		case <-r.Context().Done():
		case <-time.After(hold):
		}
	}
	s.relabel(route, 500, "InternalServerException")
	return &apiError{status: 500, code: "InternalServerException", msg: "An internal error has occurred."}
}

// record logs a PutSnapshotBlock attempt (other operations are not kept).
func (s *Server) record(route Route, body []byte, status int, code string) {
	if route.Op != OpPut {
		return
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.attempts[route.SnapshotID]
	if m == nil {
		m = map[int32][]Attempt{}
		s.attempts[route.SnapshotID] = m
	}
	m[route.Index] = append(m[route.Index], Attempt{SHA256: hex.EncodeToString(sum[:]), Len: len(body), Status: status, Code: code})
}

// relabel sets the answer of the attempt record just made.
func (s *Server) relabel(route Route, status int, code string) {
	if route.Op != OpPut {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.attempts[route.SnapshotID][route.Index]
	if len(a) > 0 {
		a[len(a)-1].Status, a[len(a)-1].Code = status, code
	}
}

// StartResponse is StartSnapshot's answer.
type StartResponse struct {
	Description string  `json:"Description,omitempty"`
	SnapshotID  string  `json:"SnapshotId"`
	OwnerID     string  `json:"OwnerId"`
	Status      string  `json:"Status"`
	StartTime   float64 `json:"StartTime"`
	VolumeSize  int64   `json:"VolumeSize"`
	BlockSize   int32   `json:"BlockSize"`
	Tags        []Tag   `json:"Tags,omitempty"`
}

func (s *Server) start(w http.ResponseWriter, body []byte) (int, string) {
	in, err := ParseStart(body)
	if err != nil {
		return writeError(w, validation("INVALID_PARAMETER_VALUE", "%v", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ClientToken != "" {
		if id, ok := s.byToken[in.ClientToken]; ok {
			sn, live := s.snapshots[id]
			if !live {
				return writeError(w, &apiError{status: 409, code: "ConflictException",
					msg: "The request uses the same client token as a previous request whose snapshot " + id + " was deleted."})
			}
			if !sameStart(sn.request, in) {
				return writeError(w, &apiError{status: 409, code: "ConflictException",
					msg: "The request uses the same client token as a previous, but non-identical request."})
			}
			s.advance(sn)
			return writeJSON(w, http.StatusCreated, startResponse(sn))
		}
	}
	id, err := newID()
	if err != nil {
		return writeError(w, &apiError{status: 500, code: "InternalServerException", msg: err.Error()})
	}
	timeout := int32(DefaultTimeout)
	if in.Timeout != nil {
		timeout = *in.Timeout
	}
	sn := &snapshot{Snapshot: Snapshot{ID: id, OwnerID: s.cfg.Account, State: StatePending, VolumeSize: *in.VolumeSize,
		Description: in.Description, Tags: in.Tags, StartTime: s.clock(), Timeout: time.Duration(timeout) * s.cfg.Minute, ChangedBlocks: -1},
		request: in, blocks: map[int32][]byte{}, digests: map[int32][32]byte{}}
	s.snapshots[id] = sn
	if in.ClientToken != "" {
		s.byToken[in.ClientToken] = id
	}
	return writeJSON(w, http.StatusCreated, startResponse(sn))
}

func sameStart(a, b StartRequest) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func startResponse(sn *snapshot) StartResponse {
	return StartResponse{Description: sn.Description, SnapshotID: sn.ID, OwnerID: sn.OwnerID, Status: sn.State,
		StartTime: float64(sn.StartTime.UnixMilli()) / 1000, VolumeSize: sn.VolumeSize, BlockSize: BlockSize, Tags: sn.Tags}
}

func newID() (string, error) {
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("drawing a snapshot ID: %w", err)
	}
	return "snap-0" + hex.EncodeToString(b)[:16], nil
}

// pendingSnapshot returns the snapshot for a write, or the error EBS answers.
func (s *Server) pendingSnapshot(id string) (*snapshot, *apiError) {
	sn, ok := s.snapshots[id]
	if !ok {
		return nil, notFound(id)
	}
	s.advance(sn)
	switch {
	case sn.State == StateError:
		return nil, validation("INVALID_SNAPSHOT_ID", "The snapshot '%s' is in the error state: %s.", id, sn.StateReason)
	case sn.State != StatePending || sn.ChangedBlocks >= 0:
		return nil, validation("INVALID_SNAPSHOT_ID", "The snapshot '%s' has been completed; no more blocks can be written to it.", id)
	}
	return sn, nil
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, route Route, body []byte) (int, string) {
	status, code, sum := s.putBlock(r, route, body)
	s.record(route, body, status, code.code)
	if code.code != "" {
		return writeError(w, &code)
	}
	w.Header().Set("x-amz-Checksum", sum)
	w.Header().Set("x-amz-Checksum-Algorithm", "SHA256")
	w.WriteHeader(http.StatusCreated)
	return http.StatusCreated, ""
}

func (s *Server) putBlock(r *http.Request, route Route, body []byte) (int, apiError, string) {
	fail := func(e *apiError) (int, apiError, string) { return e.status, *e, "" }
	dl := r.Header.Get("x-amz-Data-Length")
	n, err := strconv.Atoi(dl)
	if err != nil {
		return fail(validation("INVALID_PARAMETER_VALUE", "x-amz-Data-Length %q is not a number", dl))
	}
	if n != BlockSize {
		return fail(validation("INVALID_PARAMETER_VALUE", "x-amz-Data-Length is %d; a block is %d bytes", n, BlockSize))
	}
	if len(body) != n {
		return fail(validation("INVALID_PARAMETER_VALUE", "the body is %d bytes, x-amz-Data-Length says %d", len(body), n))
	}
	if a := r.Header.Get("x-amz-Checksum-Algorithm"); a != "SHA256" {
		return fail(validation("INVALID_PARAMETER_VALUE", "x-amz-Checksum-Algorithm %q is not SHA256", a))
	}
	sum := sha256.Sum256(body)
	got := base64.StdEncoding.EncodeToString(sum[:])
	if c := r.Header.Get("x-amz-Checksum"); c != got {
		return fail(validation("INVALID_BLOCK", "The checksum of the block data (%s) does not match the x-amz-Checksum header (%q).", got, c))
	}
	progress := -1
	if p := r.Header.Get("x-amz-Progress"); p != "" {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || v > 100 {
			return fail(validation("INVALID_PARAMETER_VALUE", "x-amz-Progress %q is not 0..100", p))
		}
		progress = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, e := s.pendingSnapshot(route.SnapshotID)
	if e != nil {
		return fail(e)
	}
	if int64(route.Index) >= sn.VolumeSize*BlocksPerGiB {
		return fail(validation("INVALID_BLOCK", "block index %d is outside the %d GiB volume (blocks 0..%d)", route.Index, sn.VolumeSize, sn.VolumeSize*BlocksPerGiB-1))
	}
	sn.blocks[route.Index] = body
	sn.digests[route.Index] = sum
	if progress >= 0 {
		sn.Progress = progress
	}
	return http.StatusCreated, apiError{}, got
}

// CompleteResponse is CompleteSnapshot's answer.
type CompleteResponse struct {
	Status string `json:"Status"`
}

// LinearChecksum is EBS's LINEAR aggregate: the base64 SHA-256 of the
// blocks' raw SHA-256 digests concatenated in block-index order.
func LinearChecksum(digests map[int32][32]byte) string {
	idx := make([]int32, 0, len(digests))
	for i := range digests {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	h := sha256.New()
	for _, i := range idx {
		d := digests[i]
		h.Write(d[:])
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, route Route) (int, string) {
	cs := r.Header.Get("x-amz-ChangedBlocksCount")
	count, err := strconv.ParseInt(cs, 10, 32)
	if err != nil || count < 0 {
		return writeError(w, validation("INVALID_PARAMETER_VALUE", "x-amz-ChangedBlocksCount %q is not a count", cs))
	}
	sum, alg, method := r.Header.Get("x-amz-Checksum"), r.Header.Get("x-amz-Checksum-Algorithm"), r.Header.Get("x-amz-Checksum-Aggregation-Method")
	if sum != "" || alg != "" || method != "" {
		if alg != "SHA256" {
			return writeError(w, validation("INVALID_PARAMETER_VALUE", "x-amz-Checksum-Algorithm %q is not SHA256", alg))
		}
		if method != "LINEAR" {
			return writeError(w, validation("INVALID_PARAMETER_VALUE", "x-amz-Checksum-Aggregation-Method %q is not LINEAR", method))
		}
		if sum == "" {
			return writeError(w, validation("INVALID_PARAMETER_VALUE", "x-amz-Checksum is required with x-amz-Checksum-Algorithm"))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, e := s.pendingSnapshot(route.SnapshotID)
	if e != nil {
		return writeError(w, e)
	}
	if int(count) != len(sn.blocks) {
		return writeError(w, validation("INVALID_PARAMETER_VALUE", "ChangedBlocksCount is %d, but %d distinct blocks were written to snapshot %s", count, len(sn.blocks), sn.ID))
	}
	if sum != "" {
		if want := LinearChecksum(sn.digests); sum != want {
			return writeError(w, validation("INVALID_PARAMETER_VALUE", "the LINEAR SHA256 checksum %q does not match the %d blocks written (%s)", sum, len(sn.blocks), want))
		}
	}
	sn.ChangedBlocks = int(count)
	sn.completing = s.clock().Add(s.cfg.CompleteAfter)
	s.advance(sn)
	return writeJSON(w, http.StatusAccepted, CompleteResponse{Status: sn.State})
}

func writeJSON(w http.ResponseWriter, status int, v any) (int, string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status, ""
}

func writeError(w http.ResponseWriter, e *apiError) (int, string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", e.code)
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Message: e.msg, Reason: e.reason})
	return e.status, e.code
}
