package imdsserver

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// FaultMode is how the stand-in misbehaves while a fault is on. FailNext and
// DelayNext count requests; a Fault is switched on and off at run time (and
// can end by itself), which is what a test that does not know when its
// client will start asking (a booting QEMU guest) needs.
type FaultMode string

// The fault modes.
const (
	// FaultStatus answers every request with Fault.Status (500 when 0),
	// as an overloaded or broken IMDS does.
	FaultStatus FaultMode = "status"
	// FaultDelay holds every request Fault.Delay (less if the fault ends
	// meanwhile), then answers it normally.
	FaultDelay FaultMode = "delay"
	// FaultTokenForbidden answers the token PUT with 403, as EC2 does when
	// the instance's metadata endpoint is disabled; other requests are
	// served (a token got before the fault still works).
	FaultTokenForbidden FaultMode = "token-403"
	// FaultHang never answers: a request waits until the fault ends (then
	// it is answered normally) or its client gives up, as with an IMDS
	// whose packets are dropped.
	FaultHang FaultMode = "hang"
	// FaultDrop resets the connection (RST) without an answer.
	FaultDrop FaultMode = "drop"
)

// Fault is one fault. The zero Fault is no fault.
type Fault struct {
	Mode FaultMode
	// Status is FaultStatus's answer; 0 means 500.
	Status int
	// Delay is FaultDelay's hold; it must be positive.
	Delay time.Duration
	// For is how long the fault lasts, counted from the first request it
	// touches (so that it does not run out while a guest is still
	// booting); 0 keeps it on until ClearFault or the next SetFault.
	For time.Duration
}

// FaultStats says what the current (or last) fault did. Times are the
// host's wall clock.
type FaultStats struct {
	Fault Fault
	// Hits counts the requests the fault touched (for FaultTokenForbidden,
	// the token PUTs).
	Hits     int
	FirstHit time.Time
	LastHit  time.Time
	// Ended is when the fault ended (For ran out, or ClearFault or
	// SetFault replaced it); zero while it is on.
	Ended time.Time
	// FirstClean is the first request after Ended that the fault no
	// longer touched; zero until one comes.
	FirstClean time.Time
}

// faultState is the Server's fault switch; the zero value is off.
type faultState struct {
	mu    sync.Mutex
	on    bool
	gen   int // bumped by every Set/Clear, so a stale For timer does nothing
	f     Fault
	stats FaultStats
	timer *time.Timer
	ended chan struct{} // closed when the current fault ends
}

// SetFault switches fault f on, replacing any current one (which ends
// now). A Fault with an empty Mode is ClearFault.
func (s *Server) SetFault(f Fault) error {
	switch f.Mode {
	case "":
		s.ClearFault()
		return nil
	case FaultStatus:
		if f.Status == 0 {
			f.Status = http.StatusInternalServerError
		}
		if f.Status < 100 || f.Status > 599 {
			return fmt.Errorf("imdsserver: fault status %d is not an HTTP status", f.Status)
		}
	case FaultDelay:
		if f.Delay <= 0 {
			return fmt.Errorf("imdsserver: a %s fault needs a positive Delay", f.Mode)
		}
	case FaultTokenForbidden, FaultHang, FaultDrop:
	default:
		return fmt.Errorf("imdsserver: unknown fault mode %q", f.Mode)
	}
	if f.For < 0 {
		return fmt.Errorf("imdsserver: negative fault duration %s", f.For)
	}
	fs := &s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.endLocked(time.Now())
	fs.on, fs.f = true, f
	fs.stats = FaultStats{Fault: f}
	fs.ended = make(chan struct{})
	return nil
}

// ClearFault switches the current fault off; requests it holds (FaultHang,
// FaultDelay) are answered normally at once.
func (s *Server) ClearFault() {
	fs := &s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.endLocked(time.Now())
}

// FaultStats returns what the current or last fault did.
func (s *Server) FaultStats() FaultStats {
	fs := &s.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.stats
}

// endLocked ends the current fault, if any, at now.
func (fs *faultState) endLocked(now time.Time) {
	fs.gen++
	if fs.timer != nil {
		fs.timer.Stop()
		fs.timer = nil
	}
	if !fs.on {
		return
	}
	fs.on = false
	fs.stats.Ended = now
	close(fs.ended)
}

// touches says whether fault f applies to request r.
func (f Fault) touches(r *http.Request) bool {
	if f.Mode == FaultTokenForbidden {
		return r.URL.Path == TokenPath
	}
	return true
}

// hit records request r against the fault and returns the fault to apply
// and the channel closed when it ends; ok is false when no fault applies.
func (fs *faultState) hit(r *http.Request) (f Fault, ended <-chan struct{}, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := time.Now()
	if !fs.on || !fs.f.touches(r) {
		if !fs.on && !fs.stats.Ended.IsZero() && fs.stats.FirstClean.IsZero() {
			fs.stats.FirstClean = now
		}
		return Fault{}, nil, false
	}
	if fs.stats.Hits == 0 {
		fs.stats.FirstHit = now
		if fs.f.For > 0 {
			gen := fs.gen
			fs.timer = time.AfterFunc(fs.f.For, func() {
				fs.mu.Lock()
				defer fs.mu.Unlock()
				if fs.gen == gen {
					fs.endLocked(time.Now())
				}
			})
		}
	}
	fs.stats.Hits++
	fs.stats.LastHit = now
	return fs.f, fs.ended, true
}

// intercept applies the current fault to r. It returns true when the
// request has been dealt with (answered, dropped, or its client gave up)
// and false when it is to be served normally.
func (s *Server) intercept(w http.ResponseWriter, r *http.Request) bool {
	f, ended, ok := s.faults.hit(r)
	if !ok {
		return false
	}
	noAnswer := func() {
		// The request log says 0: no answer was sent.
		if rec, ok := w.(*statusRecorder); ok {
			rec.status = 0
		}
	}
	switch f.Mode {
	case FaultStatus:
		httpError(w, f.Status)
		return true
	case FaultTokenForbidden:
		httpError(w, http.StatusForbidden)
		return true
	case FaultDelay:
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ended:
		case <-r.Context().Done():
			noAnswer()
			return true
		}
		return false
	case FaultHang:
		select {
		case <-ended:
			return false
		case <-r.Context().Done():
			noAnswer()
			return true
		}
	case FaultDrop:
		noAnswer()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// Not hijackable (an httptest recorder): answer nothing at all.
			return true
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
		return true
	}
	return false
}

// Unwrap lets http.ResponseController reach the connection under the
// request log's recorder (FaultDrop hijacks it).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
