package main

import (
	"context"
	"flag"

	"golang.org/x/sync/errgroup"

	"github.com/intutic/gate-operator/internal/anthropic/messagestest"
	"github.com/intutic/gate-operator/internal/google/geminitest"
	"github.com/intutic/gate-operator/internal/openai/responsestest"
)

// messages serves the scripted model API stand-ins over plain HTTP, each on a port of its own:
// the Messages API (internal/anthropic/messagestest) for Claude Code, the Responses API
// (internal/openai/responsestest) for Codex and the Gemini API (internal/google/geminitest) for
// Gemini CLI. The agents in a sandbox pod talk to them as their model APIs, and the conformance
// suite scripts each (PUT /_standin/script) and reads what the model got back
// (GET /_standin/tool-result).
func messages(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("messages", flag.ContinueOnError)
	listen := fs.String("listen", ":8080", "address of the Messages API stand-in")
	responses := fs.String("responses-listen", ":8081", "address of the Responses API stand-in")
	gemini := fs.String("gemini-listen", ":8082", "address of the Gemini API stand-in")
	if err := fs.Parse(args); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(ctx, *listen, &messagestest.Server{}, "Messages API stand-in") })
	g.Go(func() error { return serveHTTP(ctx, *responses, &responsestest.Server{}, "Responses API stand-in") })
	g.Go(func() error { return serveHTTP(ctx, *gemini, &geminitest.Server{}, "Gemini API stand-in") })
	return g.Wait()
}
