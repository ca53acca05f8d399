// Package creds gives berth's AWS clients (the EKS token signer, the ECR
// credential provider) the instance role's temporary credentials from IMDS,
// cached in the process and fetched again before they expire. They live
// only in memory: never logged (Credentials redact themselves) and never
// written to disk, so a node image holds no AWS secret at rest.
package creds

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/berth-node/berth/config/imds"
)

// Defaults for Options. EC2 puts new role credentials in IMDS at least
// 5 minutes before the old ones expire, so refreshing inside that window
// gets new ones; the hard margin keeps a signature from being made with
// credentials that expire while the request is on the wire.
const (
	DefaultRefreshBefore = 5 * time.Minute
	DefaultHardMargin    = time.Minute
	DefaultRetryEvery    = 30 * time.Second
)

// Source fetches the role's credentials; *imds.Client is one.
type Source interface {
	RoleCredentials(ctx context.Context) (*imds.Credentials, error)
}

// Options tune a Cache; the zero value uses the defaults above.
type Options struct {
	// RefreshBefore: credentials expiring within it are fetched again.
	RefreshBefore time.Duration
	// HardMargin: credentials expiring within it are never handed out.
	HardMargin time.Duration
	// RetryEvery bounds how often a fetch is tried again while IMDS still
	// serves credentials inside the refresh window (it has not rotated
	// them yet) or a refresh failed.
	RetryEvery time.Duration
	// Clock is time.Now unless a test fakes it.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Cache hands out the role's credentials, fetching them from the Source
// when it has none or they are about to expire. It is safe for concurrent
// use; concurrent callers share one fetch.
type Cache struct {
	src  Source
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	cur       *imds.Credentials
	lastFetch time.Time
	fetches   int
}

// NewCache returns a Cache over src.
func NewCache(src Source, opts Options) *Cache {
	if opts.RefreshBefore <= 0 {
		opts.RefreshBefore = DefaultRefreshBefore
	}
	if opts.HardMargin <= 0 {
		opts.HardMargin = DefaultHardMargin
	}
	if opts.RetryEvery <= 0 {
		opts.RetryEvery = DefaultRetryEvery
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{src: src, opts: opts, log: log}
}

// Decision is what Cache does on a Get, given what it holds; split out so
// the timing rules are testable on their own.
type Decision int

const (
	// Use the cached credentials as they are.
	Use Decision = iota
	// Refresh: fetch, but fall back to the cached ones if that fails.
	Refresh
	// Fetch: the cached ones (if any) cannot be used; fetch or fail.
	Fetch
)

// Decide says whether credentials expiring at exp (zero: none held), last
// fetched at last, may be used at now.
func (o Options) Decide(now, exp, last time.Time) Decision {
	switch {
	case exp.IsZero() || !now.Before(exp.Add(-o.HardMargin)):
		return Fetch
	case !now.Before(exp.Add(-o.RefreshBefore)) && !now.Before(last.Add(o.RetryEvery)):
		return Refresh
	default:
		return Use
	}
}

// Get returns usable credentials, fetching them when needed.
func (c *Cache) Get(ctx context.Context) (*imds.Credentials, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock()
	var exp time.Time
	if c.cur != nil {
		exp = c.cur.Expiration
	}
	d := c.opts.Decide(now, exp, c.lastFetch)
	if d == Use {
		return c.cur, nil
	}
	c.lastFetch = now
	c.fetches++
	cr, err := c.src.RoleCredentials(ctx)
	if err == nil && !c.opts.Clock().Before(cr.Expiration.Add(-c.opts.HardMargin)) {
		err = fmt.Errorf("IMDS served credentials for role %s that expire at %s, within %s", cr.Role, cr.Expiration.UTC().Format(time.RFC3339), c.opts.HardMargin)
	}
	if err != nil {
		if d == Refresh {
			c.log.Warn("refreshing instance role credentials failed; using the cached ones until they expire", "creds", c.cur, "err", err)
			return c.cur, nil
		}
		return nil, fmt.Errorf("getting instance role credentials from IMDS: %w", err)
	}
	c.cur = cr
	c.log.Debug("fetched instance role credentials", "creds", cr)
	return cr, nil
}

// Fetches is how many times Get asked the Source (for tests and figures).
func (c *Cache) Fetches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetches
}

// AWS converts credentials for the SDK's signer.
func AWS(cr *imds.Credentials) aws.Credentials {
	return aws.Credentials{
		AccessKeyID:     cr.AccessKeyID,
		SecretAccessKey: cr.SecretAccessKey,
		SessionToken:    cr.Token,
		Source:          "berth IMDS role " + cr.Role,
		CanExpire:       true,
		Expires:         cr.Expiration,
	}
}
