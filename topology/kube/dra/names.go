package dra

import "k8s.io/apimachinery/pkg/util/validation"

// The name checks below answer the common case, a valid name, without the
// regular expressions of k8s.io/apimachinery's validation package, which
// cost most of ResourceSlices' time (a slice names its driver, pool and
// node, and every device names a dozen attributes and capacities). A name
// the fast check does not accept goes to the validation package, whose
// answer and messages stand; so the fast check may only accept names the
// validation package accepts (TestNameChecksAgree checks that both accept
// the same names).

// labelProblems is validation.IsDNS1123Label, answered without a regular
// expression when value is a valid label.
func labelProblems(value string) []string {
	if isLabel(value) {
		return nil
	}
	return validation.IsDNS1123Label(value)
}

// subdomainProblems is validation.IsDNS1123Subdomain, answered without a
// regular expression when value is a valid subdomain.
func subdomainProblems(value string) []string {
	if isSubdomain(value) {
		return nil
	}
	return validation.IsDNS1123Subdomain(value)
}

// cIdentifierProblems is validation.IsCIdentifier, answered without a
// regular expression when value is a valid C identifier.
func cIdentifierProblems(value string) []string {
	if isCIdentifier(value) {
		return nil
	}
	return validation.IsCIdentifier(value)
}

// isLabel reports whether value is a lower-case RFC 1123 label: 1 to 63
// lower-case letters, digits and '-', starting and ending with a letter or
// digit (validation's [a-z0-9]([-a-z0-9]*[a-z0-9])?).
func isLabel(value string) bool {
	return len(value) <= validation.DNS1123LabelMaxLength && isLabelRun(value)
}

// isSubdomain reports whether value is a lower-case RFC 1123 subdomain: at
// most 253 characters of labels joined by single dots.
func isSubdomain(value string) bool {
	if len(value) > validation.DNS1123SubdomainMaxLength {
		return false
	}
	start := 0
	for i := 0; i <= len(value); i++ {
		if i == len(value) || value[i] == '.' {
			if !isLabelRun(value[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// isLabelRun reports whether s matches [a-z0-9]([-a-z0-9]*[a-z0-9])?, of
// any length.
func isLabelRun(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// isCIdentifier reports whether value matches [A-Za-z_][A-Za-z0-9_]*.
func isCIdentifier(value string) bool {
	if value == "" || value[0] >= '0' && value[0] <= '9' {
		return false
	}
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
