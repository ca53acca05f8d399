package plan

import "github.com/berth-node/berth/internal/redact"

// What the plan prints passes through these, so that package redact's
// rules apply everywhere the plan is shown and nowhere it is written: the
// files a node gets keep their real bytes.

// env is one KEY=VALUE service environment entry, as shown.
func (o DescribeOptions) env(e string) string {
	if o.ShowSecrets {
		return e
	}
	return redact.Env(e)
}

// arg is one service argument, as shown. Flag names are not judged
// (--tls-private-key-file names a file); only secret shapes in values are,
// such as kubelet's --manifest-url-header=Authorization:Bearer ....
func (o DescribeOptions) arg(a string) string {
	if o.ShowSecrets {
		return a
	}
	return redact.Value(a)
}

// text is a warning or other free text, as shown.
func (o DescribeOptions) text(s string) string {
	if o.ShowSecrets {
		return s
	}
	return redact.Text(s)
}
