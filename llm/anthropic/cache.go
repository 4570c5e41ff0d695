package anthropic

import (
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
)

// Cache lifetimes Options.CacheTTL takes.
const (
	// CacheTTL5m is the API's default lifetime: a cache entry lives five
	// minutes from its last use; writing one costs 1.25 times the input
	// rate.
	CacheTTL5m = "5m"
	// CacheTTL1h keeps an entry an hour from its last use; writing one
	// costs twice the input rate. It pays when turns are more than five
	// minutes apart (a slow tool, a person confirming a call).
	CacheTTL1h = "1h"
)

// maxBreakpoints is the most cache_control markers the API takes in one
// request; a fifth is a 400.
const maxBreakpoints = 4

// cacheControl is the marker each breakpoint carries. The default lifetime
// is sent as the bare {"type":"ephemeral"}, which the API reads as five
// minutes.
func (o Options) cacheControl() anthropic.CacheControlEphemeralParam {
	cc := anthropic.NewCacheControlEphemeralParam()
	if o.CacheTTL == CacheTTL1h {
		cc.TTL = anthropic.CacheControlEphemeralTTLTTL1h
	}
	return cc
}

// checkCacheTTL reports a CacheTTL the API would refuse.
func checkCacheTTL(ttl string) error {
	switch ttl {
	case "", CacheTTL5m, CacheTTL1h:
		return nil
	}
	return fmt.Errorf("anthropic: Options.CacheTTL is %q; want %q (the default) or %q", ttl, CacheTTL5m, CacheTTL1h)
}

// placeBreakpoints marks where the API should cache p's prompt, so that
// every turn of a tool loop reads what the turn before it wrote:
//
//  1. the head: the last system block, or the last tool when there is no
//     system prompt (the API orders a prompt tools, system, messages, so
//     this caches both), which outlives any one conversation;
//  2. the end of the previous turn's request: the message just before the
//     last assistant message, which was the last message the previous
//     request sent and where that request put its tail breakpoint. The
//     API looks for a cached prefix only at a breakpoint and at most 20
//     blocks before it, so a turn that added more than 20 blocks (a batch
//     of parallel calls and their results) would miss the previous
//     turn's entry from the tail alone; this breakpoint sits exactly on
//     it;
//  3. the tail: the last block of the last message, which writes this
//     turn's prefix for the next turn to read.
//
// That is at most three of the API's four. A breakpoint goes on the last
// block of a message that can carry one: thinking and redacted_thinking
// blocks cannot, and stay as they are (the API caches them as part of the
// prefix before a later breakpoint).
//
// Moving a marker changes the bytes of the block it leaves or reaches, but
// not the cache's key: the API matches prefixes by their content and
// takes cache_control only as the place to look, which is why a turn's
// blocks may carry a marker this turn and none the next and still be
// read from the cache.
func placeBreakpoints(p *anthropic.MessageNewParams, cc anthropic.CacheControlEphemeralParam) {
	placed := 0
	mark := func(c *anthropic.CacheControlEphemeralParam) {
		if c != nil && placed < maxBreakpoints {
			*c = cc
			placed++
		}
	}
	switch {
	case len(p.System) > 0:
		mark(&p.System[len(p.System)-1].CacheControl)
	case len(p.Tools) > 0:
		mark(p.Tools[len(p.Tools)-1].GetCacheControl())
	}
	n := len(p.Messages)
	if n == 0 {
		return
	}
	// The previous request ended just before the last assistant message.
	for i := n - 1; i >= 1; i-- {
		if p.Messages[i].OfAssistant != nil {
			mark(lastCacheable(content(p.Messages[i-1])))
			break
		}
	}
	mark(lastCacheable(content(p.Messages[n-1])))
}

// lastCacheable returns the cache_control field of the last block in
// content that has one, or nil.
func lastCacheable(content []anthropic.ContentBlockParamUnion) *anthropic.CacheControlEphemeralParam {
	for i := len(content) - 1; i >= 0; i-- {
		if c := content[i].GetCacheControl(); c != nil {
			return c
		}
	}
	return nil
}

// content returns a message's content blocks, whichever role it has.
func content(m anthropic.MessageParam) []anthropic.ContentBlockParamUnion {
	switch {
	case m.OfUser != nil:
		return m.OfUser.Content
	case m.OfAssistant != nil:
		return m.OfAssistant.Content
	}
	return nil
}
