package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/store"
)

// TestBlobs checks the Blobs contract on stores that open returns: data
// comes back byte for byte under its digest, storing it again changes
// nothing, concurrent puts of one blob agree, an unknown digest is
// ErrUnknownBlob, and neither the caller's slice nor the returned one is
// shared with the store.
func TestBlobs(t *testing.T, open func(t *testing.T) store.Blobs) {
	ctx := context.Background()
	t.Run("round trip", func(t *testing.T) {
		s := open(t)
		for _, data := range [][]byte{{}, []byte("hello"), {0, 0xff, '\n', '"'}, bytes.Repeat([]byte("0123456789"), 300_000)} {
			d, err := s.PutBlob(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			if d != store.BlobDigest(data) {
				t.Fatalf("digest %s, want %s", d, store.BlobDigest(data))
			}
			again, err := s.PutBlob(ctx, data)
			if err != nil || again != d {
				t.Fatalf("storing it again: %s, %v", again, err)
			}
			got, err := s.Blob(ctx, d)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("blob of %d bytes came back as %d bytes (%v)", len(data), len(got), err)
			}
			if err := store.CheckBlob(d, got); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("unknown", func(t *testing.T) {
		s := open(t)
		if _, err := s.Blob(ctx, store.BlobDigest([]byte("never stored"))); !errors.Is(err, store.ErrUnknownBlob) {
			t.Fatalf("err = %v, want ErrUnknownBlob", err)
		}
	})
	t.Run("not shared", func(t *testing.T) {
		s := open(t)
		data := []byte("mutable")
		d, err := s.PutBlob(ctx, data)
		if err != nil {
			t.Fatal(err)
		}
		data[0] = 'M'
		got, _ := s.Blob(ctx, d)
		got[1] = 'U'
		if again, _ := s.Blob(ctx, d); string(again) != "mutable" {
			t.Fatalf("the store shares slices: %q", again)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		s := open(t)
		data := bytes.Repeat([]byte("x"), 10_000)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				if _, err := s.PutBlob(ctx, data); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got, err := s.Blob(ctx, store.BlobDigest(data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("after concurrent puts: %d bytes, %v", len(got), err)
		}
	})
}
