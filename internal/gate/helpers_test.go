package gate_test

import "fmt"

func fmtValue(v any) string { return fmt.Sprint(v) }
