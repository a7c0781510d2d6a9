package dictpath

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// matches reports whether v is a dict that every filter matches.
func matches(v any, filters []filter) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for i := range filters {
		if !filters[i].matches(m) {
			return false
		}
	}
	return true
}

func (f *filter) matches(m map[string]any) bool {
	v, ok := m[f.key]
	if !ok {
		return false
	}
	switch f.kind {
	case valAny:
		return true
	case valNull:
		return v == nil
	}
	switch v := v.(type) {
	case string:
		return v == f.text
	case bool:
		return f.text == strconv.FormatBool(v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false // no JSON text
		}
		return f.numEqual(strconv.FormatFloat(v, 'g', -1, 64))
	case json.Number:
		return f.numEqual(string(v))
	}
	return false
}

// numEqual reports whether the number written text equals the filter value.
func (f *filter) numEqual(text string) bool {
	if text == f.text {
		return true
	}
	if !f.numOK {
		return false
	}
	c, ok := canonNumber(text)
	return ok && c == f.num
}

// maxExpDigits bounds the exponents canonNumber handles; larger ones (no
// float64 has one) are compared as text.
const maxExpDigits = 9

// canonNumber returns a JSON number in a form that is equal for equal
// values: sign, significant digits, "e" and the position of the decimal
// point, e.g. "80", "8e1" and "80.0" all give "8e2" (0.8 × 10²), and every
// zero gives "0". It reports false for text that is not a JSON number.
func canonNumber(s string) (string, bool) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return "", false
	}
	digits := s[intStart:i]
	point := len(digits)
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return "", false
		}
		digits += s[start:i]
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return "", false
		}
		exp := strings.TrimLeft(s[start:i], "0")
		if len(exp) > maxExpDigits {
			return "", false
		}
		n := 0
		if exp != "" {
			n, _ = strconv.Atoi(exp)
		}
		if expNeg {
			n = -n
		}
		point += n
	}
	if i != len(s) {
		return "", false
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return "0", true
	}
	sign := ""
	if neg {
		sign = "-"
	}
	return sign + digits + "e" + strconv.Itoa(point), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
