package main

import (
	"fmt"
	"time"
)

// retentionFlag is --tool-approval-retention: a duration that may not be negative.
type retentionFlag struct{ d *time.Duration }

func (f retentionFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f retentionFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 {
		return fmt.Errorf("%s is negative; 0 keeps finished ToolApprovals forever", d)
	}
	*f.d = d
	return nil
}
