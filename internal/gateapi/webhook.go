package gateapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/intutic/gate-operator/internal/anthropic"
)

// webhook receives Managed Agents webhooks: 401 on a bad signature, 400 on a bad body, 413
// on one past maxWebhookBody, 503 when MaxWebhookBodies are already being read, nothing
// acted on in any of these; a replay is acknowledged and ignored; session.requires_action
// queues its session and returns at once.
func (a *API) webhook(w http.ResponseWriter, r *http.Request, slots chan struct{}) {
	if a.Webhook == nil {
		writeError(w, http.StatusNotFound, "no webhook signing key is configured")
		return
	}
	body, status, msg := a.readWebhookBody(w, r, slots)
	if status != 0 {
		writeError(w, status, msg)
		return
	}
	switch err := a.Webhook.Verify(r.Header, body); {
	case errors.Is(err, anthropic.ErrWebhookReplayed):
		writeJSONStatus(w, http.StatusOK, map[string]any{"ignored": "replayed webhook-id"})
		return
	case err != nil:
		writeError(w, http.StatusUnauthorized, err.Error())
		return
	}
	var env struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Type != "event" || env.Data.Type == "" {
		badRequest(w, errors.New(`the body is not a webhook event {"type":"event","data":{...}}`))
		return
	}
	if env.Data.Type != "session.requires_action" {
		writeJSONStatus(w, http.StatusOK, map[string]any{"ignored": env.Data.Type})
		return
	}
	if env.Data.ID == "" {
		badRequest(w, errors.New("session.requires_action without a session id"))
		return
	}
	if err := a.Queue.Add(env.Data.ID); err != nil {
		// The sender retries; the watch and poll loops catch the session meanwhile.
		a.requestLog(r).Error(err, "webhook session not queued", "session", env.Data.ID)
		writeError(w, http.StatusServiceUnavailable, "the session cannot be queued now; retry later")
		return
	}
	writeJSONStatus(w, http.StatusAccepted, map[string]any{"queued": env.Data.ID})
}

// readWebhookBody reads a webhook body, at most maxWebhookBody bytes, in one of a bounded
// number of slots: nothing is authenticated before the signature is checked over the whole
// body, so the slots bound what unauthenticated clients can make the server hold. A status
// other than 0 is the answer to give instead.
func (a *API) readWebhookBody(w http.ResponseWriter, r *http.Request, slots chan struct{}) (body []byte, status int, msg string) {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		w.Header().Set("Retry-After", "1")
		return nil, http.StatusServiceUnavailable, "too many webhook deliveries in progress; retry later"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", maxWebhookBody)
	case err != nil:
		// A stalled or broken upload; the read error names addresses, so it stays here.
		a.requestLog(r).V(1).Info("webhook body not read", "error", err.Error())
		return nil, http.StatusBadRequest, "the request body could not be read"
	}
	return body, 0, ""
}
