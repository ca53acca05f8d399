package main

import "testing"

func TestConsoleEchoesDebug(t *testing.T) {
	tests := []struct {
		name           string
		printk, ignore string
		want           bool
	}{
		{"quiet", "4\t4\t1\t7\n", "N\n", false},
		{"default", "7\t4\t1\t7\n", "N\n", false},
		{"debug on the command line", "10\t4\t1\t7\n", "N\n", true},
		{"loglevel=8", "8\t4\t1\t7\n", "N\n", true},
		{"ignore_loglevel", "4\t4\t1\t7\n", "Y\n", true},
		{"unreadable", "", "", false},
		{"garbled", "x 4 1 7", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := consoleEchoesDebug([]byte(tt.printk), []byte(tt.ignore)); got != tt.want {
				t.Errorf("consoleEchoesDebug(%q, %q) = %v, want %v", tt.printk, tt.ignore, got, tt.want)
			}
		})
	}
}
