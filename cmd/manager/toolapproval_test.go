package main

import (
	"strings"
	"testing"
	"time"
)

// TestToolApprovalRetentionFlag: finished ToolApprovals are kept a day by default, 0 keeps them
// forever, and a negative retention is refused with the flag's name.
func TestToolApprovalRetentionFlag(t *testing.T) {
	s, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if s.toolApprovalRetention != 24*time.Hour {
		t.Errorf("default retention %s, want 24h", s.toolApprovalRetention)
	}
	if s, err = parse("--tool-approval-retention=0"); err != nil || s.toolApprovalRetention != 0 {
		t.Errorf("--tool-approval-retention=0: %v, %+v", err, s)
	}
	if _, err := parse("--tool-approval-retention=-1h"); err == nil || !strings.Contains(err.Error(), `invalid value "-1h" for flag -tool-approval-retention: -1h0m0s is negative`) {
		t.Errorf("a negative retention: %v", err)
	}
}
