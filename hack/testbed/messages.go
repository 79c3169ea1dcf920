package main

import (
	"context"
	"flag"

	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
)

// messages serves the scripted Messages API stand-in (internal/anthropic/messagestest) over
// plain HTTP: Claude Code in a sandbox pod talks to it as its model API, and the conformance
// suite scripts it (PUT /_standin/script) and reads what the model got back
// (GET /_standin/tool-result).
func messages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("messages", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address to serve on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return serveHTTP(ctx, *listen, &messagestest.Server{}, "Messages API stand-in")
}
