package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// A run's history on Temporal carries its conversation by reference: the
// event log lives in the workers' blob store (store.Blobs) as a chain of
// segments, each the events since the one before, and a tool result
// larger than RefThreshold lives there as a blob of its own, its content
// in the log replaced by a reference. Each piece of a conversation thus
// enters the workflow's history a bounded number of times, and the
// history grows linearly with the run rather than with its square.

// RefThreshold is the size past which a tool result's content goes to
// the blob store and the workflow's history carries a reference to it.
const RefThreshold = 8 << 10

// refKey is the one member of a reference's JSON object besides its size;
// a tool's own result of that shape is stored by reference too, so that
// every content of this shape in a log is a reference.
const refKey = "$toolloop_blob"

// blobRef is the content of a result stored by reference.
type blobRef struct {
	Blob string `json:"$toolloop_blob"`
	Size int    `json:"size"`
}

// refOf returns the digest content refers to, if it is a reference.
func refOf(content json.RawMessage) (string, bool) {
	if len(content) == 0 || len(content) > 256 || !bytes.Contains(content, []byte(refKey)) {
		return "", false
	}
	var r blobRef
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if dec.Decode(&r) != nil || !strings.HasPrefix(r.Blob, "sha256:") {
		return "", false
	}
	return r.Blob, true
}

// byReference stores content in blobs and returns its reference, when it
// is larger than RefThreshold or looks like a reference itself; else it
// returns content unchanged.
func byReference(ctx context.Context, blobs store.Blobs, content json.RawMessage) (json.RawMessage, error) {
	if _, looks := refOf(content); len(content) <= RefThreshold && !looks {
		return content, nil
	}
	d, err := blobs.PutBlob(ctx, content)
	if err != nil {
		return nil, fmt.Errorf("storing a tool result of %d bytes: %w", len(content), err)
	}
	return json.Marshal(blobRef{Blob: d, Size: len(content)})
}

// segment is one piece of a run's event log in the blob store: the
// events after those of the segment Prev names ("" for the first).
type segment struct {
	Prev   string       `json:"prev,omitempty"`
	Events []loop.Event `json:"events"`
}

// logCache keeps the logs that segments end, by the digest of their last
// segment: content-addressed data never changes, so a worker that has
// read a run's log once only reads the new segments of the next turns.
type logCache struct {
	mu   sync.Mutex
	logs map[string][]loop.Event
	// events counts the events logs holds.
	events int
	// blobs keeps resolved tool results, by digest.
	blobs map[string][]byte
	size  int
}

// logCacheRuns, logCacheEvents and logCacheBytes bound a worker's cache:
// the logs of this many runs' latest turns, this many events in all, and
// this many bytes of resolved results.
const (
	logCacheRuns   = 256
	logCacheEvents = 1 << 20
	logCacheBytes  = 64 << 20
)

func newLogCache() *logCache {
	return &logCache{logs: map[string][]loop.Event{}, blobs: map[string][]byte{}}
}

func (c *logCache) log(head string) ([]loop.Event, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	evs, ok := c.logs[head]
	return evs, ok
}

func (c *logCache) keepLog(head string, evs []loop.Event) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.logs) >= logCacheRuns || c.events+len(evs) > logCacheEvents {
		clear(c.logs)
		c.events = 0
	}
	if old, ok := c.logs[head]; ok {
		c.events -= len(old)
	}
	c.logs[head] = slices.Clip(evs)
	c.events += len(evs)
}

// dropLog forgets the log whose head was head: a run's next turn extends
// it under a new head, and only a retried activity would ask for the old
// one again (it is read from the store then).
func (c *logCache) dropLog(head string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.logs[head]; ok {
		c.events -= len(old)
		delete(c.logs, head)
	}
}

func (c *logCache) blob(d string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[d]
	return b, ok
}

func (c *logCache) keepBlob(d string, b []byte) {
	if c == nil || len(b) > logCacheBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size+len(b) > logCacheBytes {
		clear(c.blobs)
		c.size = 0
	}
	c.blobs[d] = b
	c.size += len(b)
}

// appendLog stores the events after the log head ends as a new segment
// and returns its digest; with no events, head itself.
func appendLog(ctx context.Context, blobs store.Blobs, c *logCache, head string, events []loop.Event) (string, error) {
	if len(events) == 0 {
		return head, nil
	}
	data, err := json.Marshal(segment{Prev: head, Events: events})
	if err != nil {
		return "", fmt.Errorf("encoding a segment of the run's log: %w", err)
	}
	d, err := blobs.PutBlob(ctx, data)
	if err != nil {
		return "", fmt.Errorf("storing a segment of the run's log: %w", err)
	}
	if prev, ok := c.log(head); ok || head == "" {
		c.keepLog(d, slices.Concat(prev, events))
		c.dropLog(head)
	}
	return d, nil
}

// readLog returns the events of the log whose last segment is head, in
// order; "" is the empty log.
func readLog(ctx context.Context, blobs store.Blobs, c *logCache, head string) ([]loop.Event, error) {
	var parts [][]loop.Event
	d := head
	for d != "" {
		if evs, ok := c.log(d); ok {
			parts = append(parts, evs)
			break
		}
		data, err := blobs.Blob(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("reading the run's log: %w", err)
		}
		var seg segment
		if err := json.Unmarshal(data, &seg); err != nil {
			return nil, fmt.Errorf("reading the run's log: segment %s: %w", d, err)
		}
		parts = append(parts, seg.Events)
		d = seg.Prev
	}
	slices.Reverse(parts)
	evs := slices.Concat(parts...)
	for i := range evs {
		if evs[i].Seq != i+1 {
			return nil, fmt.Errorf("reading the run's log: event %d has sequence number %d", i+1, evs[i].Seq)
		}
	}
	if head != "" {
		c.keepLog(head, evs)
	}
	return evs, nil
}

// resolve returns content with a reference replaced by the data it names.
func resolve(ctx context.Context, blobs store.Blobs, c *logCache, content json.RawMessage) (json.RawMessage, error) {
	d, ok := refOf(content)
	if !ok {
		return content, nil
	}
	if b, ok := c.blob(d); ok {
		return b, nil
	}
	b, err := blobs.Blob(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("reading a tool result: %w", err)
	}
	c.keepBlob(d, b)
	return b, nil
}

// resolveMessages returns msgs with every referenced result resolved; a
// message it changes is copied, never written to.
func resolveMessages(ctx context.Context, blobs store.Blobs, c *logCache, msgs []llm.Message) ([]llm.Message, error) {
	out := msgs
	copied := false
	for i := range msgs {
		r := msgs[i].Result
		if r == nil {
			continue
		}
		content, err := resolve(ctx, blobs, c, r.Content)
		if err != nil {
			return nil, err
		}
		if len(content) == len(r.Content) && bytes.Equal(content, r.Content) {
			continue
		}
		if !copied {
			out, copied = slices.Clone(msgs), true
		}
		rr := *r
		rr.Content = content
		out[i].Result = &rr
	}
	return out, nil
}

// resolveEvents returns events with every referenced result of their
// outcomes resolved, copying what it changes.
func resolveEvents(ctx context.Context, blobs store.Blobs, events []loop.Event) ([]loop.Event, error) {
	out := slices.Clone(events)
	for i := range out {
		if len(out[i].Outcomes) == 0 {
			continue
		}
		outs := slices.Clone(out[i].Outcomes)
		for j := range outs {
			content, err := resolve(ctx, blobs, nil, outs[j].Result.Content)
			if err != nil {
				return nil, err
			}
			outs[j].Result.Content = content
		}
		out[i].Outcomes = outs
	}
	return out, nil
}

// ReadLog returns a run's event log from the blob store its workers
// share, from RunOutput.Log, with every tool result resolved: the log the
// in-process runner would have kept.
func ReadLog(ctx context.Context, blobs store.Blobs, log string) ([]loop.Event, error) {
	if blobs == nil {
		return nil, errors.New("temporal: ReadLog needs the workers' blob store")
	}
	if log == "" {
		return nil, errors.New("temporal: the run's output names no log (the workflow ended before its first event)")
	}
	evs, err := readLog(ctx, blobs, nil, log)
	if err != nil {
		return nil, err
	}
	return resolveEvents(ctx, blobs, evs)
}

// ResolveEvents returns events, as the events query gives them, with
// every tool result stored by reference read back from the workers' blob
// store, copying what it changes: the events the in-process runner would
// have kept.
func ResolveEvents(ctx context.Context, blobs store.Blobs, events []loop.Event) ([]loop.Event, error) {
	if blobs == nil {
		return nil, errors.New("temporal: ResolveEvents needs the workers' blob store")
	}
	return resolveEvents(ctx, blobs, events)
}

// ReadResult returns the whole loop.Result of a run from its small
// output and the blob store its workers share: the log, and the history
// with exactly one result per call, every tool result resolved, as the
// in-process runner returns it.
func ReadResult(ctx context.Context, blobs store.Blobs, out RunOutput) (*loop.Result, error) {
	evs, err := ReadLog(ctx, blobs, out.Log)
	if err != nil {
		return nil, err
	}
	res := loop.Replay(evs).Result(evs)
	if res.Status != out.Status || res.Steps != out.Steps {
		return nil, fmt.Errorf("temporal: the log of run %s ends %s after %d steps, its output says %s after %d",
			out.RunID, res.Status, res.Steps, out.Status, out.Steps)
	}
	return res, nil
}

// outcomeRefs stores an outcome's large result by reference.
func outcomeRefs(ctx context.Context, blobs store.Blobs, o *executor.Outcome) error {
	content, err := byReference(ctx, blobs, o.Result.Content)
	if err != nil {
		return err
	}
	o.Result.Content = content
	return nil
}
