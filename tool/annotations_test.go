package tool

import "testing"

func TestAnnotationsApplyTo(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name   string
		a      Annotations
		effect Effect
		risk   Risk
	}{
		{"no hints: assume a destructive write", Annotations{}, Write, RiskHigh},
		{"read-only, closed world", Annotations{ReadOnlyHint: &yes, OpenWorldHint: &no}, ReadOnly, RiskLow},
		{"read-only, open world by default", Annotations{ReadOnlyHint: &yes}, ReadOnly, RiskMedium},
		{"explicitly not read-only", Annotations{ReadOnlyHint: &no, DestructiveHint: &no}, Write, RiskMedium},
		{"non-destructive idempotent write", Annotations{DestructiveHint: &no, IdempotentHint: &yes}, Write, RiskLow},
		{"destructive even if idempotent", Annotations{DestructiveHint: &yes, IdempotentHint: &yes}, Write, RiskHigh},
	}
	for _, tc := range cases {
		var d Definition
		tc.a.ApplyTo(&d)
		if d.Effect != tc.effect || d.Risk != tc.risk {
			t.Errorf("%s: effect %s risk %s, want %s %s", tc.name, d.Effect, d.Risk, tc.effect, tc.risk)
		}
	}
}
