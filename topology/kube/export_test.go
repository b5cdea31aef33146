package kube

// MaxDecodedAnnotationBytes is the limit the external tests (package
// kube_test) check; it is unexported (see the Limits table in the package
// documentation).
const MaxDecodedAnnotationBytes = maxDecodedAnnotationBytes
