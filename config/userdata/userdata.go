// Package userdata turns raw EC2 user data into the documents inside it.
// User data arrives as plain YAML or JSON, as MIME multipart (what eksctl,
// Karpenter and EKS managed node groups write), and possibly wrapped in
// base64 and gzip. Every layer is recognised by its content, never by a
// guess from a field, and every layer is bounded in size and depth because
// user data is input from outside the machine.
//
// It only decodes: which documents are NodeConfigs is decided by their
// content type, and parsing them is nodeconfig's job.
package userdata

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// NodeConfigContentType is the MIME type of a NodeConfig part.
const NodeConfigContentType = "application/node.eks.aws"

// Limits that keep hostile or mistaken user data from exhausting PID 1's
// memory. Each error that enforces one names it.
const (
	// MaxUserDataSize is EC2's limit on raw user data (16 KiB, counted
	// before base64 or gzip is undone). EC2 refuses larger user data at
	// launch, so more from IMDS means something is wrong; Decode refuses it
	// and the imds client reads no more than this of the answer.
	MaxUserDataSize = 16 << 10
	// MaxDecodedSize caps the bytes produced by all decoding layers
	// together (gzip output, base64 output, MIME part bodies), and the raw
	// size of a file given to DecodeNamed. 16 KiB of gzip can inflate to
	// 16 MiB, and gzip inside gzip to gigabytes, so every layer is read
	// through a limit and stopped the moment it passes this one; real
	// NodeConfigs are a few KiB.
	MaxDecodedSize = 4 << 20
	// MaxDepth caps how many layers (gzip, base64, multipart) may wrap one
	// another.
	MaxDepth = 8
	// MaxMultipartDepth caps multipart nesting: a multipart message is
	// depth 1, a multipart part inside it depth 2. eksctl, Karpenter and
	// managed node groups write depth 1; 3 leaves room for tools that wrap
	// their input once more.
	MaxMultipartDepth = 3
	// MaxParts caps the number of MIME parts across all levels; real user
	// data has two or three.
	MaxParts = 32
)

// Document is one piece of user data after every wrapping is removed.
type Document struct {
	// Source names where it came from, for messages: "user-data" for a
	// plain document, "user-data part 2 (application/node.eks.aws)" for a
	// MIME part, "user-data part 2.1 (...)" inside a nested multipart.
	Source string
	// ContentType is the MIME type, without parameters: the part's header
	// for MIME parts; for unwrapped data, application/node.eks.aws unless
	// the content is recognisably a script or cloud-config.
	ContentType string
	// Data is the decoded content.
	Data []byte
	// Skip, when not empty, says why this document is not a NodeConfig,
	// for the caller's log line. Data is then left empty, but for a shell
	// script (IsShellScript), whose text is kept: an Amazon Linux 2 node's
	// script runs bootstrap.sh, whose arguments berth reads (config/al2);
	// and for cloud-config (IsCloudConfig): eksctl's Amazon Linux 2 user
	// data is cloud-config, whose files berth reads (config/al2 too).
	Skip string
	// MistypedNodeConfig marks a skipped part whose content is a NodeConfig
	// all the same (typed text/plain, or with no type): nodeadm skips it
	// too, but its author meant it to configure the node, and the errors
	// that follow ("spec.cluster.name: required") would hide why.
	MistypedNodeConfig bool
}

// IsNodeConfig reports whether the document should be parsed as a
// NodeConfig.
func (d Document) IsNodeConfig() bool { return d.Skip == "" }

// IsShellScript reports whether the document is a shell script: typed
// text/x-shellscript (or one of cloud-init's per-boot, per-instance and
// per-once variants), or text/plain or untyped and starting with "#!", as
// cloud-init would run it.
func (d Document) IsShellScript() bool {
	return isShellScript(d.ContentType) ||
		d.ContentType == "text/plain" && bytes.HasPrefix(bytes.TrimSpace(d.Data), []byte("#!"))
}

// IsCloudConfig reports whether the document is cloud-init's
// cloud-config: typed text/cloud-config, or starting with "#cloud-config".
func (d Document) IsCloudConfig() bool { return d.ContentType == "text/cloud-config" }

// keepsData says whether a skipped document of this type keeps its text
// (see Document.Skip).
func keepsData(contentType string) bool {
	return isShellScript(contentType) || contentType == "text/cloud-config"
}

func isShellScript(contentType string) bool {
	switch contentType {
	case "text/x-shellscript", "text/x-shellscript-per-boot", "text/x-shellscript-per-instance", "text/x-shellscript-per-once":
		return true
	}
	return false
}

// Decode decodes user data fetched from IMDS; sources are named "user-data".
// Data over MaxUserDataSize is refused: EC2 allows no more.
func Decode(data []byte) ([]Document, error) {
	const name = "user-data"
	if len(data) > MaxUserDataSize {
		return nil, fmt.Errorf("decoding %s: %d bytes is over EC2's %d-byte limit on raw user data (userdata.MaxUserDataSize)", name, len(data), MaxUserDataSize)
	}
	return DecodeNamed(name, data)
}

// DecodeNamed decodes data from the named source (a file path, for
// example), which prefixes every Document.Source. Empty or all-whitespace
// data gives no documents and no error: an instance may have no user data.
// Data over MaxDecodedSize is refused; Decode holds user data to EC2's
// smaller limit.
func DecodeNamed(name string, data []byte) ([]Document, error) {
	d := &decoder{budget: MaxDecodedSize}
	if len(data) > MaxDecodedSize {
		return nil, fmt.Errorf("decoding %s: %d bytes is over the %d-byte limit (userdata.MaxDecodedSize)", name, len(data), MaxDecodedSize)
	}
	if err := d.layer(name, "", data, 0); err != nil {
		return nil, err
	}
	return d.docs, nil
}

type decoder struct {
	docs []Document
	// budget is what is left of MaxDecodedSize.
	budget int
	parts  int
	// nesting is how many multipart messages enclose the part being
	// decoded.
	nesting int
}

var gzipMagic = []byte{0x1f, 0x8b}

// layer decodes one layer of data found at name. partType is the content
// type of the MIME part the data came from, or "" outside any MIME part,
// where the type is sniffed from the content.
func (d *decoder) layer(name, partType string, data []byte, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("decoding %s: more than %d nested layers of gzip, base64 or multipart (userdata.MaxDepth)", name, MaxDepth)
	}
	// Windows editors prefix a byte-order mark, which would hide a MIME
	// header or a shebang.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		if partType != "" {
			d.docs = append(d.docs, Document{Source: name, ContentType: partType, Skip: "empty"})
		}
		return nil
	case bytes.HasPrefix(data, gzipMagic):
		out, err := d.gunzip(name, data)
		if err != nil {
			return err
		}
		return d.layer(name, partType, out, depth+1)
	case partType == "" && looksLikeMIME(trimmed):
		return d.mime(name, trimmed, depth)
	}
	out, ok, err := d.base64(name, trimmed)
	if err != nil {
		return err
	}
	if ok {
		return d.layer(name, partType, out, depth+1)
	}
	ct := partType
	if ct == "" {
		ct = sniffPlain(trimmed)
	}
	doc := Document{Source: name, ContentType: ct}
	if ct == NodeConfigContentType {
		doc.Data = data
	} else {
		doc.Skip = skipReason(ct)
		if keepsData(ct) {
			doc.Data = data
		}
	}
	d.docs = append(d.docs, doc)
	return nil
}

// take charges n decoded bytes against the budget.
func (d *decoder) take(name string, n int) error {
	d.budget -= n
	if d.budget < 0 {
		return d.overBudget(name)
	}
	return nil
}

func (d *decoder) overBudget(name string) error {
	return fmt.Errorf("decoding %s: decoded user data is over the %d-byte limit (userdata.MaxDecodedSize)", name, MaxDecodedSize)
}

func (d *decoder) gunzip(name string, data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err) // says "gzip: ..."
	}
	defer zr.Close()
	// Read one byte past the budget so that overflowing it is detected
	// without ever holding more than the budget.
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(zr, int64(d.budget)+1))
	if err != nil {
		return nil, fmt.Errorf("decoding %s: gzip: %w", name, err)
	}
	if err := d.take(name, int(n)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// base64 decodes data when it is entirely base64 (line breaks allowed) and
// the result is itself something user data can be: gzip, MIME, or a YAML
// or JSON mapping. A plain word that happens to be valid base64 is thus
// left alone.
func (d *decoder) base64(name string, data []byte) ([]byte, bool, error) {
	compact := make([]byte, 0, len(data))
	for _, c := range data {
		switch {
		case c == '\n' || c == '\r' || c == ' ' || c == '\t':
			continue
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
			compact = append(compact, c)
		default:
			return nil, false, nil
		}
	}
	if len(compact) < 4 {
		return nil, false, nil
	}
	enc := base64.StdEncoding
	if !bytes.HasSuffix(compact, []byte("=")) && len(compact)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	// Refuse before allocating: anything this long made only of base64
	// characters is no NodeConfig either way.
	if enc.DecodedLen(len(compact)) > d.budget {
		return nil, false, d.overBudget(name)
	}
	out := make([]byte, enc.DecodedLen(len(compact)))
	n, err := enc.Decode(out, compact)
	if err != nil {
		return nil, false, nil
	}
	out = out[:n]
	if !meaningful(out) {
		return nil, false, nil
	}
	if err := d.take(name, n); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// meaningful reports whether decoded base64 is user data rather than noise.
func meaningful(b []byte) bool {
	if bytes.HasPrefix(b, gzipMagic) {
		return true
	}
	t := bytes.TrimSpace(b)
	if len(t) == 0 || !isText(t) {
		return false
	}
	if looksLikeMIME(t) || t[0] == '{' || bytes.HasPrefix(t, []byte("#!")) || bytes.HasPrefix(t, []byte("#cloud-config")) {
		return true
	}
	return looksLikeYAMLMapping(t)
}

// isText reports whether b is printable text (valid UTF-8 without control
// characters other than whitespace).
func isText(b []byte) bool {
	for _, r := range string(b) {
		if r == 0xFFFD || (r < 0x20 && r != '\n' && r != '\r' && r != '\t') {
			return false
		}
	}
	return true
}

// looksLikeYAMLMapping reports whether the first meaningful line of b is a
// "key: value" or "key:" line, or a document marker.
func looksLikeYAMLMapping(b []byte) bool {
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "---" {
			return true
		}
		key, _, ok := strings.Cut(line, ":")
		if !ok || key == "" {
			return false
		}
		for _, r := range key {
			if !(r == '_' || r == '-' || r == '.' || r == '"' || r == '\'' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
		return true
	}
	return false
}

// looksLikeMIME reports whether b starts with a MIME header. Only these two
// header names count, so YAML with an unrelated first key is never taken
// for a message.
func looksLikeMIME(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	name, _, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return false
	}
	n := strings.ToLower(string(name))
	return n == "mime-version" || n == "content-type"
}

// sniffPlain names the content type of unwrapped, non-MIME data.
func sniffPlain(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("#!")):
		return "text/x-shellscript"
	case bytes.HasPrefix(b, []byte("#cloud-config")):
		return "text/cloud-config"
	case bytes.HasPrefix(b, []byte("#include")):
		return "text/x-include-url"
	case bytes.HasPrefix(b, []byte("<powershell>")), bytes.HasPrefix(b, []byte("<script>")):
		return "text/x-windows-script"
	}
	return NodeConfigContentType
}

func skipReason(contentType string) string {
	switch contentType {
	case "text/x-shellscript", "text/x-shellscript-per-boot", "text/x-shellscript-per-instance", "text/x-shellscript-per-once", "text/x-windows-script":
		return "berth runs no scripts"
	case "text/cloud-config", "text/x-include-url", "text/cloud-boothook", "text/part-handler", "text/jinja2":
		return "berth has no cloud-init"
	}
	return "not a NodeConfig (want " + NodeConfigContentType + ")"
}

// mime decodes a MIME message: a multipart one part by part, a single-part
// one as its body.
func (d *decoder) mime(name string, data []byte, depth int) error {
	br := bufio.NewReader(bytes.NewReader(data))
	hdr, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil && !(errors.Is(err, io.EOF) && len(hdr) > 0) {
		return fmt.Errorf("decoding %s: MIME header: %w", name, err)
	}
	body, err := io.ReadAll(br)
	if err != nil {
		return fmt.Errorf("decoding %s: MIME body: %w", name, err)
	}
	return d.entity(name, "", textproto.MIMEHeader(hdr), body, depth)
}

// entity handles one MIME entity (the message itself or a part). number is
// the dotted part number ("" for the top-level message).
func (d *decoder) entity(name, number string, hdr textproto.MIMEHeader, body []byte, depth int) error {
	where := name
	if number != "" {
		where = name + " part " + number
	}
	ct := hdr.Get("Content-Type")
	if ct == "" {
		// RFC 2045's default; a NodeConfig part must say what it is.
		ct = "text/plain"
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if errors.Is(err, mime.ErrInvalidMediaParameter) {
		// eksctl writes boundary=// unquoted, which RFC 2045 forbids
		// (/ is not a token character) but EC2 users rely on.
		params, err = map[string]string{"boundary": looseBoundary(ct)}, nil
	}
	if err != nil {
		return fmt.Errorf("decoding %s: Content-Type %q: %w", where, ct, err)
	}
	if number != "" {
		where += " (" + shorten(mediaType) + ")"
	}
	body, err = d.transferDecode(where, hdr.Get("Content-Transfer-Encoding"), body)
	if err != nil {
		return err
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		return d.multipart(name, number, params["boundary"], body, depth+1)
	}
	if mediaType != NodeConfigContentType {
		doc := Document{Source: where, ContentType: mediaType, Skip: skipReason(mediaType)}
		if keepsData(mediaType) {
			doc.Data = body
		}
		if mediaType == "text/plain" {
			// cloud-init runs untyped parts by their content, so say what
			// this one would have been.
			if sniffed := sniffPlain(bytes.TrimSpace(body)); sniffed != NodeConfigContentType {
				doc.Skip = skipReason(sniffed)
				if keepsData(sniffed) {
					doc.Data = body
				}
			} else if nodeConfigKind.Match(body) {
				doc.MistypedNodeConfig = true
				typed := "typed " + mediaType
				if hdr.Get("Content-Type") == "" {
					typed = "with no Content-Type (MIME's default is text/plain)"
				}
				doc.Skip = "it holds a NodeConfig, but " + typed + "; berth, like nodeadm, reads only parts typed " + NodeConfigContentType + " (set the part's Content-Type)"
			}
		}
		d.docs = append(d.docs, doc)
		return nil
	}
	// A NodeConfig part may still be gzipped or base64 inside.
	return d.layer(where, mediaType, body, depth+1)
}

// nodeConfigKind finds a NodeConfig's kind line, in YAML or JSON.
var nodeConfigKind = regexp.MustCompile(`(?m)^\s*kind\s*:\s*["']?NodeConfig\b|"kind"\s*:\s*"NodeConfig"`)

var boundaryParam = regexp.MustCompile(`(?i)(?:^|;)\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s]+))`)

// looseBoundary extracts the boundary parameter from a Content-Type that
// mime.ParseMediaType rejects; "" when there is none.
func looseBoundary(ct string) string {
	m := boundaryParam.FindStringSubmatch(ct)
	if m == nil {
		return ""
	}
	return m[1] + m[2]
}

func (d *decoder) transferDecode(where, cte string, body []byte) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "quoted-printable":
		out, err := io.ReadAll(io.LimitReader(quotedprintable.NewReader(bytes.NewReader(body)), int64(d.budget)+1))
		if err != nil {
			return nil, fmt.Errorf("decoding %s: Content-Transfer-Encoding quoted-printable: %w", where, err)
		}
		if err := d.take(where, len(out)); err != nil {
			return nil, err
		}
		return out, nil
	case "base64":
		compact := bytes.Map(func(r rune) rune {
			if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
				return -1
			}
			return r
		}, body)
		if base64.StdEncoding.DecodedLen(len(compact)) > d.budget {
			return nil, d.overBudget(where)
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(compact)))
		n, err := base64.StdEncoding.Decode(out, compact)
		if err != nil {
			return nil, fmt.Errorf("decoding %s: Content-Transfer-Encoding base64: %w", where, err)
		}
		if err := d.take(where, n); err != nil {
			return nil, err
		}
		return out[:n], nil
	default:
		return nil, fmt.Errorf("decoding %s: unsupported Content-Transfer-Encoding %q", where, cte)
	}
}

func (d *decoder) multipart(name, number, boundary string, body []byte, depth int) error {
	where := name
	if number != "" {
		where = name + " part " + number
	}
	if depth > MaxDepth {
		return fmt.Errorf("decoding %s: more than %d nested layers of gzip, base64 or multipart (userdata.MaxDepth)", where, MaxDepth)
	}
	if d.nesting >= MaxMultipartDepth {
		return fmt.Errorf("decoding %s: multipart nested more than %d deep (userdata.MaxMultipartDepth)", where, MaxMultipartDepth)
	}
	d.nesting++
	defer func() { d.nesting-- }()
	if boundary == "" {
		return fmt.Errorf("decoding %s: multipart Content-Type has no boundary", where)
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for i := 1; ; i++ {
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			if i == 1 {
				// Otherwise a multipart whose parts went unseen reads as
				// user data with no NodeConfig, and the errors blame fields.
				return fmt.Errorf("decoding %s: no part begins with the Content-Type's boundary line --%s%s", where, shorten(boundary), delimitersSeen(body))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("decoding %s: part %d: %w", where, i, err)
		}
		d.parts++
		if d.parts > MaxParts {
			return fmt.Errorf("decoding %s: more than %d MIME parts (userdata.MaxParts)", where, MaxParts)
		}
		num := strconv.Itoa(i)
		if number != "" {
			num = number + "." + num
		}
		pbody, err := io.ReadAll(io.LimitReader(p, int64(d.budget)+1))
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("decoding %s part %s: %w (is the closing --%s-- line missing?)", name, num, err, boundary)
		}
		if err != nil {
			return fmt.Errorf("decoding %s part %s: %w", name, num, err)
		}
		if err := d.take(name+" part "+num, len(pbody)); err != nil {
			return err
		}
		if err := d.entity(name, num, p.Header, pbody, depth); err != nil {
			return err
		}
	}
}

// delimitersSeen names the lines of body that look like MIME delimiters
// ("--" and a token), for an error about a boundary that never matched.
func delimitersSeen(body []byte) string {
	var seen []string
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, "\r\n")
		if len(line) < 3 || !bytes.HasPrefix(line, []byte("--")) || bytes.ContainsAny(line, " \t") {
			continue
		}
		q := strconv.Quote(shorten(string(line)))
		if !slices.Contains(seen, q) {
			seen = append(seen, q)
		}
		if len(seen) == 3 {
			break
		}
	}
	if len(seen) == 0 {
		return " (the body has no line starting with --)"
	}
	return " (the body has " + strings.Join(seen, ", ") + ": is the boundary parameter the one the parts use?)"
}

// shorten bounds a name taken from the input (a MIME type) before it goes
// into every Source and message derived from it.
func shorten(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return strings.ToValidUTF8(s[:limit], "") + "..."
}
