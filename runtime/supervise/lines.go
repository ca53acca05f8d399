package supervise

import (
	"bufio"
	"io"
	"log/slog"
	"strings"
)

// maxLine bounds one log line; longer lines are cut, so a service writing
// without newlines cannot grow berth's memory.
const maxLine = 16 << 10

// Classify guesses a log line's level from the formats berth's services
// use: klog (kubelet: "E1122 10:00:00.000000 ..."), logrus text
// (containerd: `level=error`), JSON (`"level":"error"`), and Go's own
// crash output. Anything else is Info. It only decides what reaches the
// console; every line goes to the ring and the file regardless.
func Classify(line string) slog.Level {
	lvl, _ := lineLevel(line)
	return lvl
}

// lineLevel is Classify's level, and whether the line carried a level at
// all: a line with none (a CLI's last words on stderr) is Info to the
// console but may still be why the program stopped.
func lineLevel(line string) (slog.Level, bool) {
	if len(line) >= 5 && isDigits(line[1:5]) {
		switch line[0] {
		case 'I':
			return slog.LevelInfo, true
		case 'W':
			return slog.LevelWarn, true
		case 'E', 'F':
			return slog.LevelError, true
		}
	}
	if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
		return slog.LevelError, true
	}
	for _, key := range []string{"level=", `"level":"`} {
		i := strings.Index(line, key)
		if i < 0 {
			continue
		}
		v := line[i+len(key):]
		v = strings.TrimPrefix(v, `"`)
		switch {
		case hasPrefixFold(v, "debug"), hasPrefixFold(v, "trace"):
			return slog.LevelDebug, true
		case hasPrefixFold(v, "info"):
			return slog.LevelInfo, true
		case hasPrefixFold(v, "warn"):
			return slog.LevelWarn, true
		case hasPrefixFold(v, "err"), hasPrefixFold(v, "fatal"), hasPrefixFold(v, "panic"):
			return slog.LevelError, true
		}
	}
	return slog.LevelInfo, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// readLines calls fn for each line read from r until EOF or an error,
// without the newline; lines longer than maxLine are cut there and the rest
// of them dropped.
func readLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 4096)
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 && len(buf) < maxLine {
			buf = append(buf, chunk[:min(len(chunk), maxLine-len(buf))]...)
		}
		if err != nil {
			// EOF, or the pipe closed under us: either way the output is
			// over; a last line without a newline still counts.
			if len(buf) > 0 {
				fn(string(buf))
			}
			return
		}
		if !isPrefix {
			fn(strings.TrimSuffix(string(buf), "\r"))
			buf = buf[:0]
		}
	}
}
