package cmd

import (
	"fmt"

	"example.test/m/net"
)

const KeyA = "berth.a"

func knownKeys() []string {
	fmt.Println()
	return []string{KeyA, net.KeyB, "berth.c"}
}
