// Package ec2 is a stand-in for the EC2 calls `make publish` makes after
// the EBS direct APIs wrote a snapshot: DescribeSnapshots (the snapshot
// waiter), RegisterImage, DescribeImages (the image waiter, and the look-up
// of an AMI already registered under a name) and DeleteSnapshot. It speaks
// EC2's query protocol (a form-encoded POST, Action and Version=2016-11-15,
// SigV4 for service "ec2"), answers EC2's XML and its error shape
// (<Response><Errors><Error><Code>), and enforces what RegisterImage
// enforces: a unique name of 3-128 allowed characters, the root device among
// the block device mappings, the root snapshot completed, TPM only with
// UEFI boot, IMDS v2.0, a UefiData blob that decodes (CheckUEFIData). The
// snapshots are the EBS stand-in's, as EC2 sees what EBS wrote.
package ec2

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"github.com/berth-node/berth/image/secureboot/uefidata"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-node/berth/qemu-tests/awsstub/ebs"
	"github.com/berth-node/berth/qemu-tests/awsstub/internal/serve"
	"github.com/berth-node/berth/qemu-tests/awsstub/sigv4"
)

// APIVersion is the only EC2 API version answered.
const APIVersion = "2016-11-15"

const xmlns = "http://ec2.amazonaws.com/doc/2016-11-15/"

// MaxUEFIData is RegisterImage's limit on UefiData (base64 text).
const MaxUEFIData = 64 << 10

// Config configures the stand-in.
type Config struct {
	Credentials sigv4.Credentials
	Region      string
	Account     string
	// EBS holds the snapshots (required).
	EBS *ebs.Server
	// AvailableAfter is how long a registered image stays pending.
	AvailableAfter time.Duration
	// CheckUEFIData checks RegisterImage's UefiData (base64 text); nil
	// means uefidata.Check, the whole blob decoded as EC2 decodes it.
	CheckUEFIData func(b64 []byte) error
	Clock         func() time.Time
	Logger        *slog.Logger
}

// Mapping is one block device mapping of a registered image.
type Mapping struct {
	DeviceName          string
	SnapshotID          string
	VolumeType          string
	VolumeSize          int64
	DeleteOnTermination bool
}

// Image is a registered image.
type Image struct {
	ID, Name, Description, Architecture, BootMode, TpmSupport, ImdsSupport string
	RootDeviceName, VirtualizationType, UefiData                           string
	EnaSupport                                                             bool
	Mappings                                                               []Mapping
	Registered                                                             time.Time
	// Params are RegisterImage's parameters as received, Action and
	// Version left out, for tests that check exactly what was asked.
	Params url.Values
}

// Server is the stand-in; it is an http.Handler.
type Server struct {
	cfg   Config
	clock func() time.Time
	log   *slog.Logger
	reqs  serve.Log
	check func([]byte) error

	mu     sync.Mutex
	images map[string]*Image
	faults map[string][]Fault
}

// Fault is an injected error answer for one action.
type Fault struct {
	Status        int
	Code, Message string
}

// New checks cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Credentials.AccessKeyID == "" || cfg.Credentials.SecretAccessKey == "" {
		return nil, fmt.Errorf("ec2 stand-in: Credentials.AccessKeyID and SecretAccessKey are required")
	}
	if cfg.Region == "" || cfg.Account == "" || cfg.EBS == nil {
		return nil, fmt.Errorf("ec2 stand-in: Region, Account and EBS are required")
	}
	s := &Server{cfg: cfg, clock: cfg.Clock, log: serve.Discard(cfg.Logger), check: cfg.CheckUEFIData,
		images: map[string]*Image{}, faults: map[string][]Fault{}}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.check == nil {
		s.check = uefidata.Check
	}
	return s, nil
}

// Start serves s over plain HTTP on addr (AWS_ENDPOINT_URL_EC2).
func (s *Server) Start(addr string) (url string, stop func(), err error) {
	return serve.Start("ec2 stand-in", addr, s, nil, s.log)
}

// Requests returns the request log.
func (s *Server) Requests() []serve.Request { return s.reqs.All() }

// Inject queues error answers for the next requests of action.
func (s *Server) Inject(action string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[action] = append(s.faults[action], faults...)
}

// Images returns the registered images by ID.
func (s *Server) Images() []Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Image
	for _, im := range s.images {
		out = append(out, *im)
	}
	slices.SortFunc(out, func(a, b Image) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// uefiMagic starts EC2's UefiData blob (awslabs/python-uefivars aws.py).
// apiError is an EC2 error answer.
type apiError struct {
	status    int
	code, msg string
}

func invalid(code, format string, args ...any) *apiError {
	return &apiError{status: 400, code: code, msg: fmt.Sprintf(format, args...)}
}

// ec2Codes are the codes EC2 answers for sigv4's failures.
var ec2Codes = map[string]struct {
	code   string
	status int
}{
	sigv4.CodeIncompleteSignature:   {"IncompleteSignature", 400},
	sigv4.CodeMissingAuthentication: {"MissingAuthenticationToken", 401},
	sigv4.CodeInvalidClientTokenID:  {"AuthFailure", 401},
	sigv4.CodeSignatureDoesNotMatch: {"AuthFailure", 401},
	sigv4.CodeExpiredToken:          {"RequestExpired", 400},
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	action, status, code := s.serve(w, r)
	s.reqs.Add(serve.Request{Method: r.Method, Path: "/" + action, Status: status, Code: code})
	s.log.Debug("ec2 stand-in", "action", action, "status", status, "code", code)
}

// ParseForm decodes a query-protocol body and checks Action and Version.
func ParseForm(body []byte) (url.Values, error) {
	q, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("the body is not form-encoded: %v", err)
	}
	if v := q.Get("Version"); v != APIVersion {
		return nil, fmt.Errorf("Version %q is not %s", v, APIVersion)
	}
	if q.Get("Action") == "" {
		return nil, errors.New("no Action")
	}
	return q, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) (string, int, string) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		st, c := writeError(w, invalid("InvalidAction", "%s %s: the query API is POST /", r.Method, r.URL.Path))
		return "", st, c
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		st, c := writeError(w, invalid("InvalidParameterValue", "reading the body: %v", err))
		return "", st, c
	}
	if _, verr := sigv4.VerifyHeader(r, body, sigv4.Static(s.cfg.Credentials), sigv4.Expect{Service: "ec2", Region: s.cfg.Region, Now: s.clock()}); verr != nil {
		c := ec2Codes[verr.Code]
		st, code := writeError(w, &apiError{status: c.status, code: c.code, msg: verr.Message})
		return "", st, code
	}
	q, err := ParseForm(body)
	if err != nil {
		st, c := writeError(w, invalid("InvalidParameterValue", "%v", err))
		return "", st, c
	}
	action := q.Get("Action")
	if f, ok := s.takeFault(action); ok {
		st, c := writeError(w, &apiError{status: f.Status, code: f.Code, msg: f.Message})
		return action, st, c
	}
	var res any
	var e *apiError
	switch action {
	case "DescribeSnapshots":
		res, e = s.describeSnapshots(q)
	case "RegisterImage":
		res, e = s.registerImage(q)
	case "DescribeImages":
		res, e = s.describeImages(q)
	case "DeleteSnapshot":
		res, e = s.deleteSnapshot(q)
	default:
		e = invalid("InvalidAction", "The action %s is not valid for this web service.", action)
	}
	if e != nil {
		st, c := writeError(w, e)
		return action, st, c
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(res)
	return action, http.StatusOK, ""
}

func (s *Server) takeFault(action string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.faults[action]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.faults[action] = q[1:]
	return q[0], true
}

// list returns prefix.1, prefix.2... until one is missing.
func list(q url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		k := prefix + "." + strconv.Itoa(i)
		if !q.Has(k) {
			return out
		}
		out = append(out, q.Get(k))
	}
}

type snapshotXML struct {
	SnapshotID    string `xml:"snapshotId"`
	VolumeID      string `xml:"volumeId"`
	Status        string `xml:"status"`
	StatusMessage string `xml:"statusMessage,omitempty"`
	StartTime     string `xml:"startTime"`
	Progress      string `xml:"progress"`
	OwnerID       string `xml:"ownerId"`
	VolumeSize    int64  `xml:"volumeSize"`
	Description   string `xml:"description"`
	Encrypted     bool   `xml:"encrypted"`
}

type describeSnapshotsResponse struct {
	XMLName   xml.Name      `xml:"DescribeSnapshotsResponse"`
	Xmlns     string        `xml:"xmlns,attr"`
	RequestID string        `xml:"requestId"`
	Snapshots []snapshotXML `xml:"snapshotSet>item"`
}

func (s *Server) describeSnapshots(q url.Values) (any, *apiError) {
	ids := list(q, "SnapshotId")
	var all []ebs.Snapshot
	if len(ids) == 0 {
		all = s.cfg.EBS.Snapshots()
	}
	for _, id := range ids {
		sn, ok := s.cfg.EBS.Lookup(id)
		if !ok {
			return nil, invalid("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
		}
		all = append(all, sn)
	}
	res := describeSnapshotsResponse{Xmlns: xmlns, RequestID: requestID(), Snapshots: []snapshotXML{}}
	for _, sn := range all {
		p := fmt.Sprintf("%d%%", sn.Progress)
		if sn.State == ebs.StateCompleted {
			p = "100%"
		}
		res.Snapshots = append(res.Snapshots, snapshotXML{SnapshotID: sn.ID, VolumeID: "vol-ffffffff", Status: sn.State, StatusMessage: sn.StateReason,
			StartTime: sn.StartTime.UTC().Format(time.RFC3339), Progress: p, OwnerID: sn.OwnerID, VolumeSize: sn.VolumeSize, Description: sn.Description})
	}
	return res, nil
}

var (
	// amiName is EC2's rule for image names.
	amiName     = regexp.MustCompile(`^[a-zA-Z0-9().\-/_ ]{3,128}$`)
	volumeTypes = []string{"standard", "io1", "io2", "gp2", "gp3", "sc1", "st1"}
	arches      = []string{"i386", "x86_64", "arm64", "x86_64_mac", "arm64_mac"}
	bootModes   = []string{"legacy-bios", "uefi", "uefi-preferred"}
)

func parseBool(q url.Values, k string) (bool, *apiError) {
	v := q.Get(k)
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, invalid("InvalidParameterValue", "Value (%s) for parameter %s is invalid. Expected a boolean.", v, k)
}

type registerImageResponse struct {
	XMLName   xml.Name `xml:"RegisterImageResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	ImageID   string   `xml:"imageId"`
}

func (s *Server) registerImage(q url.Values) (any, *apiError) {
	im := &Image{Name: q.Get("Name"), Description: q.Get("Description"), Architecture: q.Get("Architecture"), BootMode: q.Get("BootMode"),
		TpmSupport: q.Get("TpmSupport"), ImdsSupport: q.Get("ImdsSupport"), RootDeviceName: q.Get("RootDeviceName"),
		VirtualizationType: q.Get("VirtualizationType"), UefiData: q.Get("UefiData"), Registered: s.clock()}
	var e *apiError
	if im.EnaSupport, e = parseBool(q, "EnaSupport"); e != nil {
		return nil, e
	}
	if q.Get("ImageLocation") != "" {
		return nil, invalid("InvalidParameterCombination", "ImageLocation (an S3 manifest) is not supported by this stand-in; register from a snapshot")
	}
	switch {
	case !amiName.MatchString(im.Name):
		return nil, invalid("InvalidAMIName.Malformed", "AMI names must be between 3 and 128 characters long, and may contain letters, numbers, '(', ')', '.', '-', '/', '_' and spaces; got %q", im.Name)
	case len(im.Description) > 255:
		return nil, invalid("InvalidParameterValue", "Description is %d characters, at most 255", len(im.Description))
	case im.Architecture != "" && !slices.Contains(arches, im.Architecture):
		return nil, invalid("InvalidParameterValue", "Value (%s) for parameter architecture is invalid.", im.Architecture)
	case im.BootMode != "" && !slices.Contains(bootModes, im.BootMode):
		return nil, invalid("InvalidParameterValue", "Value (%s) for parameter bootMode is invalid.", im.BootMode)
	case im.TpmSupport != "" && im.TpmSupport != "v2.0":
		return nil, invalid("InvalidParameterValue", "Value (%s) for parameter tpmSupport is invalid.", im.TpmSupport)
	case im.TpmSupport != "" && im.BootMode != "uefi":
		return nil, invalid("InvalidParameterCombination", "TPM support requires the boot mode uefi; the boot mode is %q", im.BootMode)
	case im.ImdsSupport != "" && im.ImdsSupport != "v2.0":
		return nil, invalid("InvalidParameterValue", "Value (%s) for parameter imdsSupport is invalid.", im.ImdsSupport)
	case im.VirtualizationType != "" && im.VirtualizationType != "hvm" && im.VirtualizationType != "paravirtual":
		return nil, invalid("InvalidParameterValue", "Value (%s) for parameter virtualizationType is invalid.", im.VirtualizationType)
	case im.UefiData != "" && im.BootMode != "uefi" && im.BootMode != "uefi-preferred":
		return nil, invalid("InvalidParameterCombination", "UefiData requires the boot mode uefi or uefi-preferred; the boot mode is %q", im.BootMode)
	case len(im.UefiData) > MaxUEFIData:
		return nil, invalid("InvalidParameterValue", "UefiData is %d bytes, at most %d", len(im.UefiData), MaxUEFIData)
	case im.RootDeviceName == "":
		return nil, invalid("InvalidParameterValue", "RootDeviceName is required to register an image from a snapshot")
	}
	if im.UefiData != "" {
		if err := s.check([]byte(im.UefiData)); err != nil {
			return nil, invalid("InvalidParameterValue", "Invalid UefiData: %v", err)
		}
	}
	var root *Mapping
	for i := 1; ; i++ {
		p := "BlockDeviceMapping." + strconv.Itoa(i) + "."
		if !q.Has(p + "DeviceName") {
			if q.Has(p+"Ebs.SnapshotId") || q.Has(p+"VirtualName") {
				return nil, invalid("InvalidBlockDeviceMapping", "BlockDeviceMapping.%d has no DeviceName", i)
			}
			break
		}
		m := Mapping{DeviceName: q.Get(p + "DeviceName"), SnapshotID: q.Get(p + "Ebs.SnapshotId"), VolumeType: q.Get(p + "Ebs.VolumeType")}
		if m.DeleteOnTermination, e = parseBool(q, p+"Ebs.DeleteOnTermination"); e != nil {
			return nil, e
		}
		if v := q.Get(p + "Ebs.VolumeSize"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return nil, invalid("InvalidParameterValue", "BlockDeviceMapping.%d Ebs.VolumeSize %q is not a size in GiB", i, v)
			}
			m.VolumeSize = n
		}
		if m.VolumeType != "" && !slices.Contains(volumeTypes, m.VolumeType) {
			return nil, invalid("InvalidParameterValue", "Value (%s) for parameter volumeType is invalid.", m.VolumeType)
		}
		for _, o := range im.Mappings {
			if o.DeviceName == m.DeviceName {
				return nil, invalid("InvalidBlockDeviceMapping", "device %s is mapped twice", m.DeviceName)
			}
		}
		im.Mappings = append(im.Mappings, m)
	}
	for i := range im.Mappings {
		if im.Mappings[i].DeviceName == im.RootDeviceName {
			root = &im.Mappings[i]
		}
	}
	if root == nil {
		return nil, invalid("InvalidBlockDeviceMapping", "The root device name %s is not among the block device mappings.", im.RootDeviceName)
	}
	for _, m := range im.Mappings {
		if m.SnapshotID == "" {
			if m == *root {
				return nil, invalid("InvalidBlockDeviceMapping", "the root device %s has no snapshot", m.DeviceName)
			}
			continue
		}
		sn, ok := s.cfg.EBS.Lookup(m.SnapshotID)
		if !ok {
			return nil, invalid("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", m.SnapshotID)
		}
		if sn.State != ebs.StateCompleted {
			return nil, invalid("IncorrectState", "Snapshot '%s' is in state '%s', not completed.", m.SnapshotID, sn.State)
		}
		if m.VolumeSize != 0 && m.VolumeSize < sn.VolumeSize {
			return nil, invalid("InvalidBlockDeviceMapping", "Volume of size %d GiB is smaller than snapshot '%s', expect size >= %d GiB", m.VolumeSize, m.SnapshotID, sn.VolumeSize)
		}
	}
	params := url.Values{}
	for k, v := range q {
		if k != "Action" && k != "Version" {
			params[k] = v
		}
	}
	im.Params = params
	id, err := newID()
	if err != nil {
		return nil, &apiError{status: 500, code: "InternalError", msg: err.Error()}
	}
	im.ID = id
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.images {
		if o.Name == im.Name {
			return nil, invalid("InvalidAMIName.Duplicate", "AMI name %s is already in use by AMI %s", im.Name, o.ID)
		}
	}
	s.images[id] = im
	return registerImageResponse{Xmlns: xmlns, RequestID: requestID(), ImageID: id}, nil
}

func newID() (string, error) {
	b := make([]byte, 9)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("drawing an image ID: %w", err)
	}
	return "ami-0" + hex.EncodeToString(b)[:16], nil
}

type mappingXML struct {
	DeviceName string `xml:"deviceName"`
	Ebs        struct {
		SnapshotID          string `xml:"snapshotId,omitempty"`
		VolumeSize          int64  `xml:"volumeSize,omitempty"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
		VolumeType          string `xml:"volumeType,omitempty"`
	} `xml:"ebs"`
}

type imageXML struct {
	ImageID            string       `xml:"imageId"`
	ImageState         string       `xml:"imageState"`
	OwnerID            string       `xml:"imageOwnerId"`
	CreationDate       string       `xml:"creationDate"`
	Architecture       string       `xml:"architecture,omitempty"`
	ImageType          string       `xml:"imageType"`
	Name               string       `xml:"name"`
	Description        string       `xml:"description,omitempty"`
	RootDeviceType     string       `xml:"rootDeviceType"`
	RootDeviceName     string       `xml:"rootDeviceName"`
	Mappings           []mappingXML `xml:"blockDeviceMapping>item"`
	VirtualizationType string       `xml:"virtualizationType,omitempty"`
	EnaSupport         bool         `xml:"enaSupport"`
	BootMode           string       `xml:"bootMode,omitempty"`
	TpmSupport         string       `xml:"tpmSupport,omitempty"`
	ImdsSupport        string       `xml:"imdsSupport,omitempty"`
}

type describeImagesResponse struct {
	XMLName   xml.Name   `xml:"DescribeImagesResponse"`
	Xmlns     string     `xml:"xmlns,attr"`
	RequestID string     `xml:"requestId"`
	Images    []imageXML `xml:"imagesSet>item"`
}

func (s *Server) describeImages(q url.Values) (any, *apiError) {
	ids := list(q, "ImageId")
	for _, o := range list(q, "Owner") {
		if o != "self" && o != s.cfg.Account {
			return nil, invalid("InvalidUserID.Malformed", "Owner %q: this stand-in knows the caller's own images only", o)
		}
	}
	filters := map[string][]string{}
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i) + "."
		if !q.Has(p + "Name") {
			break
		}
		name := q.Get(p + "Name")
		if name != "name" && name != "image-id" && name != "state" {
			return nil, invalid("InvalidParameterValue", "The filter '%s' is invalid", name)
		}
		filters[name] = append(filters[name], list(q, p+"Value")...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if _, ok := s.images[id]; !ok {
			return nil, invalid("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	res := describeImagesResponse{Xmlns: xmlns, RequestID: requestID(), Images: []imageXML{}}
	var keys []string
	for id := range s.images {
		keys = append(keys, id)
	}
	slices.Sort(keys)
	for _, id := range keys {
		im := s.images[id]
		state := "pending"
		if !s.clock().Before(im.Registered.Add(s.cfg.AvailableAfter)) {
			state = "available"
		}
		if len(ids) > 0 && !slices.Contains(ids, id) ||
			len(filters["name"]) > 0 && !slices.Contains(filters["name"], im.Name) ||
			len(filters["image-id"]) > 0 && !slices.Contains(filters["image-id"], im.ID) ||
			len(filters["state"]) > 0 && !slices.Contains(filters["state"], state) {
			continue
		}
		x := imageXML{ImageID: im.ID, ImageState: state, OwnerID: s.cfg.Account, CreationDate: im.Registered.UTC().Format("2006-01-02T15:04:05.000Z"),
			Architecture: im.Architecture, ImageType: "machine", Name: im.Name, Description: im.Description, RootDeviceType: "ebs",
			RootDeviceName: im.RootDeviceName, VirtualizationType: im.VirtualizationType, EnaSupport: im.EnaSupport, BootMode: im.BootMode,
			TpmSupport: im.TpmSupport, ImdsSupport: im.ImdsSupport}
		for _, m := range im.Mappings {
			var mx mappingXML
			mx.DeviceName = m.DeviceName
			mx.Ebs.SnapshotID, mx.Ebs.VolumeSize, mx.Ebs.DeleteOnTermination, mx.Ebs.VolumeType = m.SnapshotID, m.VolumeSize, m.DeleteOnTermination, m.VolumeType
			x.Mappings = append(x.Mappings, mx)
		}
		res.Images = append(res.Images, x)
	}
	return res, nil
}

type deleteSnapshotResponse struct {
	XMLName   xml.Name `xml:"DeleteSnapshotResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Return    bool     `xml:"return"`
}

func (s *Server) deleteSnapshot(q url.Values) (any, *apiError) {
	id := q.Get("SnapshotId")
	if id == "" {
		return nil, invalid("MissingParameter", "The request must contain the parameter SnapshotId")
	}
	s.mu.Lock()
	for _, im := range s.images {
		for _, m := range im.Mappings {
			if m.SnapshotID == id {
				s.mu.Unlock()
				return nil, invalid("InvalidSnapshot.InUse", "The snapshot %s is currently in use by %s", id, im.ID)
			}
		}
	}
	s.mu.Unlock()
	if !s.cfg.EBS.Delete(id) {
		return nil, invalid("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
	}
	return deleteSnapshotResponse{Xmlns: xmlns, RequestID: requestID(), Return: true}, nil
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// errorResponse is EC2's error body.
type errorResponse struct {
	XMLName xml.Name `xml:"Response"`
	Errors  []struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Errors>Error"`
	RequestID string `xml:"RequestID"`
}

func writeError(w http.ResponseWriter, e *apiError) (int, string) {
	var r errorResponse
	r.RequestID = requestID()
	r.Errors = append(r.Errors, struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}{e.code, e.msg})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(r)
	return e.status, e.code
}
