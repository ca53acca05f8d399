package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/berth-node/berth/config/nodeconfig"
	"github.com/berth-node/berth/config/userdata"
	"github.com/berth-node/berth/internal/redact"
)

// cmdConvert prints the NodeConfig that user data means: NodeConfig, MIME,
// an Amazon Linux 2 bootstrap.sh script, gzip or base64 of those, merged as
// one node would merge them (nodeconfig.Convert). "-" reads standard input
// as IMDS user data.
func cmdConvert(e env, args []string) int {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: berth convert FILE... (- for user data on standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	var srcs []nodeconfig.Source
	for _, a := range fs.Args() {
		if a != "-" {
			s, err := nodeconfig.FileSources(a)
			if err != nil {
				fmt.Fprintln(e.stderr, "berth convert:", err)
				return 1
			}
			srcs = append(srcs, s...)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(e.stdin, userdata.MaxUserDataSize+1))
		if err != nil {
			fmt.Fprintln(e.stderr, "berth convert: reading standard input:", err)
			return 1
		}
		srcs = append(srcs, nodeconfig.Source{Name: nodeconfig.UserDataSource, Data: data})
	}
	res, _ := nodeconfig.Load(e.ctx, e.log, srcs)
	out, err := nodeconfig.Convert(res)
	if err != nil {
		for _, p := range res.Problems {
			fmt.Fprintln(e.stderr, redact.Text(p.String()))
		}
		fmt.Fprintln(e.stderr, "berth convert:", err)
		return 1
	}
	if _, err := e.stdout.Write(out); err != nil {
		fmt.Fprintln(e.stderr, "berth convert:", err)
		return 1
	}
	return 0
}
