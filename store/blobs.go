package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Blobs keeps content-addressed blobs: data named by its SHA-256 digest,
// such as a conversation's messages or a large tool result, which workers
// on several machines must all reach and which a workflow history should
// carry by reference rather than by value.
type Blobs interface {
	// PutBlob stores data under its digest (BlobDigest) and returns the
	// digest. Storing data that is already stored changes nothing.
	PutBlob(ctx context.Context, data []byte) (string, error)
	// Blob returns the data stored under digest, checked against it;
	// ErrUnknownBlob if there is none.
	Blob(ctx context.Context, digest string) ([]byte, error)
}

// ErrUnknownBlob says no blob is stored under a digest.
var ErrUnknownBlob = errors.New("store: unknown blob")

// BlobDigest returns the name data is stored under: "sha256:" and the hex
// SHA-256 of data.
func BlobDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// CheckBlob returns an error unless data is what digest names: a store
// hands back nothing that was changed or mixed up on the way.
func CheckBlob(digest string, data []byte) error {
	if got := BlobDigest(data); got != digest {
		return fmt.Errorf("store: blob %s holds data whose digest is %s", digest, got)
	}
	return nil
}
