//go:build !unix

package testlock

func canStop() bool { return false }
