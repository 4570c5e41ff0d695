//go:build !unix

package mcp_test

func ignoreTerm() {}
