package kube_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"testing"
)

// encodeB64Gzip gzips s and returns it in base64, for hand-made annotations.
func encodeB64Gzip(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
