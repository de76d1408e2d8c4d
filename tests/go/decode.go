// Decodes every response of the worker the way the Duet Go server does:
// JSON into typed structs with int64 timestamps, whatever the status, with a
// non-empty "error" meaning failure. Usage: go run decode.go BASE_URL ROOM
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"
)

type Message struct {
	Role   string `json:"role"`
	UserID string `json:"userId,omitempty"`
	Text   string `json:"text"`
	TS     int64  `json:"ts"`
}

type MessageResponse struct {
	Reply    string    `json:"reply"`
	Messages []Message `json:"messages"`
	Error    string    `json:"error,omitempty"`
}

type ExecResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exitCode"`
	Success   bool   `json:"success"`
	Command   string `json:"command"`
	Duration  int64  `json:"duration"`
	Timestamp string `json:"timestamp"`
}

type ExecResponse struct {
	Result      ExecResult `json:"result"`
	SandboxName string     `json:"sandboxName"`
	Error       string     `json:"error,omitempty"`
}

type CleanupResponse struct {
	Cleaned bool     `json:"cleaned"`
	RoomID  string   `json:"roomId"`
	Errors  []string `json:"errors"`
	Error   string   `json:"error,omitempty"`
}

var client = &http.Client{Timeout: 30 * time.Second}

func call(method, url string, body any, out any) int {
	var reader *bytes.Reader
	if body != nil {
		encoded, _ := json.Marshal(body)
		reader = bytes.NewReader(encoded)
	} else {
		reader = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, reader)
	must(err)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	must(err)
	defer res.Body.Close()
	must(json.NewDecoder(res.Body).Decode(out))
	return res.StatusCode
}

func must(err error) {
	if err != nil {
		fmt.Println("FAIL:", err)
		os.Exit(1)
	}
}

func check(ok bool, format string, args ...any) {
	if !ok {
		must(fmt.Errorf(format, args...))
	}
}

func main() {
	base, room := os.Args[1], os.Args[2]
	rooms := base + "/api/rooms/" + room

	var sent MessageResponse
	status := call("POST", rooms+"/message", map[string]string{"text": "hello", "userId": "ana"}, &sent)
	check(status == 200 && sent.Error == "", "message: %d %q", status, sent.Error)
	check(len(sent.Messages) == 2 && sent.Messages[0].TS > 1_700_000_000_000, "message history: %+v", sent.Messages)

	var history MessageResponse
	status = call("GET", rooms+"/messages", nil, &history)
	check(status == 200 && len(history.Messages) == 2 && history.Messages[1].TS >= history.Messages[0].TS, "history: %+v", history)

	var exec ExecResponse
	status = call("POST", rooms+"/sandbox/exec", map[string]string{"cmd": "echo go; exit 4"}, &exec)
	check(status == 200 && exec.Result.Stdout == "go\n" && exec.Result.ExitCode == 4 && !exec.Result.Success, "exec: %+v", exec)
	check(exec.SandboxName == "sandbox-"+room, "sandboxName %q", exec.SandboxName)

	var invalid MessageResponse
	status = call("POST", rooms+"/message", map[string]string{"text": " "}, &invalid)
	check(status == 400 && invalid.Error != "", "invalid: %d %+v", status, invalid)

	var cleaned CleanupResponse
	status = call("DELETE", rooms, nil, &cleaned)
	check(status == 200 && cleaned.Cleaned && cleaned.RoomID == room, "cleanup: %d %+v", status, cleaned)
	fmt.Println("ok")
}
