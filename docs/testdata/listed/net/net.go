package net

const (
	KeyB  = "berth.b"
	other = 3
)
