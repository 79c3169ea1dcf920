package gate

import "github.com/intutic/gate-operator/internal/gate/toolname"

// The tool shapes the gate knows: where each built-in tool's input names what the call reads,
// writes, fetches or runs. It is the one table the view (callview.go), its tests and the README
// follow. Names match as tool patterns do (case, '_' and '-' folded), so one row serves Claude
// Code's Read, the harness's read and Managed Agents' read.
//
// Sources: Claude Code, @anthropic-ai/claude-agent-sdk 0.3.332 sdk-tools.d.ts (tool input
// schemas) and BUILTIN_TOOL_NAMES (specs/harness-workflow-wire.md §4.6); the harness built-ins,
// @ai-sdk/harness HARNESS_V1_BUILTIN_TOOLS and the claude-code adapter's keys (§1.11); Managed
// Agents' agent_toolset_20260401, @anthropic-ai/sdk 1.14.0 resources/beta/agents (bash, read,
// write, edit, glob, grep, web_fetch, web_search; web_fetch's {url} and web_search's {query} are
// the Messages API server tools' inputs); Codex CLI 0.171.0, which reports its shell tool to a
// PreToolUse hook as Claude Code's Bash (specs/codex-observed.md); Gemini CLI 0.61.0's built-in
// tools, read from its bundled declarations (@google/gemini-cli bundle, SHELL_TOOL_NAME and the
// PARAM_ constants; docs/sandbox-integration.md).
//
// A tool that is not in the table and not an MCP tool gets kind "unknown", every list empty and
// ShellKnown true; an MCP tool gets kind "mcp" and empty lists. Either way the rules still see
// the raw input, and the view is never an error.

// Kinds of call, CallView.Kind.
const (
	KindRead    = "read"
	KindWrite   = "write"
	KindExec    = "exec"
	KindFetch   = "fetch"
	KindMCP     = "mcp"
	KindOther   = "other"
	KindUnknown = "unknown"
)

// ToolShape is one row of the table: the input fields that name what a tool touches. A field
// that is absent, empty or not a string is skipped.
type ToolShape struct {
	// Names are the tool's names as the runtimes spell them.
	Names []string
	// Runtimes says where the tool comes from: claude-code, harness, managed-agents, codex,
	// gemini-cli.
	Runtimes []string
	Kind     string
	// Reads and Writes are fields holding a path the call reads or writes (an edit does both).
	// A field is a name, "a.b" (field b of object field a), or "a|b": the first of a and b that
	// the input has, where runtimes spell one field two ways.
	Reads, Writes []string
	// ReadLists are fields holding a list of paths or globs the call reads.
	ReadLists []string
	// Dir is a field holding the directory a search reads (the working directory when absent),
	// and Pattern a field holding a glob under it whose literal leading directories are read too.
	Dir, Pattern string
	// URLs are fields holding a URL the call fetches; "ws.url" is field url of object field ws.
	URLs []string
	// TextURLs are fields holding text whose words with "://" are URLs the call fetches, as
	// Gemini CLI's web_fetch reads its prompt (parsePrompt: split on white space).
	TextURLs []string
	// Shell is a field holding a POSIX shell command line, parsed into commands, and ShellDir a
	// field holding the directory it runs in (the working directory when absent).
	Shell, ShellDir string
	// Patch is a field holding a patch in the apply_patch format (Codex): every file it adds,
	// updates, deletes or moves to is written, and every file it updates or moves is read.
	Patch string
	// Code is a field holding code the gate does not parse (PowerShell): the call runs
	// something, and the commands are not known.
	Code string
}

// The runtimes of ToolShape.Runtimes, and the input fields several rows name.
const (
	rtClaudeCode    = "claude-code"
	rtHarness       = "harness"
	rtManagedAgents = "managed-agents"
	rtCodex         = "codex"
	rtGemini        = "gemini-cli"

	fieldCommand  = "command"
	fieldFilePath = "file_path"
)

var (
	claudeCode    = []string{rtClaudeCode}
	gemini        = []string{rtGemini}
	everyRuntime  = []string{rtClaudeCode, rtHarness, rtManagedAgents}
	claudeHarness = []string{rtClaudeCode, rtHarness}
	// withCodex and withGemini are tools of Claude Code, the harness and Managed Agents that the
	// other CLI names the same way; claudeHarnessMore, the MCP resource tools all four name.
	withCodex         = []string{rtClaudeCode, rtHarness, rtManagedAgents, rtCodex}
	withGemini        = []string{rtClaudeCode, rtHarness, rtManagedAgents, rtGemini}
	claudeHarnessMore = []string{rtClaudeCode, rtHarness, rtCodex, rtGemini}
)

// toolShapes is the table. Rows with kind "other" are tools that touch no file, URL or command
// the gate can name (task lists, questions, plan mode, sub-agents).
var toolShapes = []ToolShape{
	{Names: []string{"Bash"}, Runtimes: withCodex, Kind: KindExec, Shell: fieldCommand},
	{Names: []string{"Monitor"}, Runtimes: claudeHarness, Kind: KindExec, Shell: fieldCommand, URLs: []string{"ws.url"}},
	{Names: []string{"PowerShell"}, Runtimes: claudeCode, Kind: KindExec, Code: fieldCommand},
	{Names: []string{"Read"}, Runtimes: everyRuntime, Kind: KindRead, Reads: []string{fieldFilePath}},
	{Names: []string{"Write"}, Runtimes: everyRuntime, Kind: KindWrite, Writes: []string{fieldFilePath}},
	{Names: []string{"Edit", "MultiEdit"}, Runtimes: everyRuntime, Kind: KindWrite, Reads: []string{fieldFilePath}, Writes: []string{fieldFilePath}},
	{Names: []string{"NotebookEdit"}, Runtimes: claudeHarness, Kind: KindWrite, Reads: []string{"notebook_path"}, Writes: []string{"notebook_path"}},
	// Gemini CLI's glob names its directory dir_path; the others name it path.
	{Names: []string{"Glob"}, Runtimes: withGemini, Kind: KindRead, Dir: "path|dir_path", Pattern: "pattern"},
	{Names: []string{"Grep"}, Runtimes: everyRuntime, Kind: KindRead, Dir: "path"},
	// web_fetch is Managed Agents' {url} and Gemini CLI's {prompt} (URLs among its words) or {url}.
	{Names: []string{"WebFetch", "web_fetch"}, Runtimes: withGemini, Kind: KindFetch, URLs: []string{"url"}, TextURLs: []string{"prompt"}},
	{Names: []string{"WebSearch", "web_search"}, Runtimes: everyRuntime, Kind: KindFetch},
	{Names: []string{"ReadMcpResource", "ReadMcpResourceTool", "ReadMcpResourceDirTool", "read_mcp_resource"}, Runtimes: claudeHarnessMore, Kind: KindMCP, URLs: []string{"uri"}},
	{Names: []string{"ListMcpResources", "ListMcpResourcesTool", "list_mcp_resources", "list_mcp_resource_templates"}, Runtimes: claudeHarnessMore, Kind: KindMCP},
	// Codex's apply_patch (a freeform tool of the models its catalog lists): the whole patch in
	// command, one call for every file it names. A patch sent through the shell tool instead
	// (apply_patch <<'EOF' ... EOF, which Codex applies itself) is Bash's: see patchCommands.
	{Names: []string{"apply_patch"}, Runtimes: []string{rtCodex}, Kind: KindWrite, Patch: fieldCommand},
	{Names: []string{
		"Agent", "Task", "TaskCreate", "TaskGet", "TaskUpdate", "TaskList", "TaskStop", "TaskOutput",
		"TodoWrite", "AskUserQuestion", "askUserQuestions", "EnterPlanMode", "ExitPlanMode",
		"EnterWorktree", "ExitWorktree", "Skill", "ToolSearch",
	}, Runtimes: claudeHarness, Kind: KindOther},
	// Gemini CLI's own built-ins.
	{Names: []string{"run_shell_command"}, Runtimes: gemini, Kind: KindExec, Shell: fieldCommand, ShellDir: "dir_path"},
	{Names: []string{"read_file"}, Runtimes: gemini, Kind: KindRead, Reads: []string{fieldFilePath + "|absolute_path"}},
	// read_many_files is in the bundle (READ_MANY_FILES_TOOL_NAME) but not offered to a headless
	// run of 0.61.0.
	{Names: []string{"read_many_files"}, Runtimes: gemini, Kind: KindRead, ReadLists: []string{"include"}},
	{Names: []string{"list_directory"}, Runtimes: gemini, Kind: KindRead, Dir: "dir_path|path"},
	{Names: []string{"grep_search", "search_file_content"}, Runtimes: gemini, Kind: KindRead, Dir: "dir_path|path"},
	{Names: []string{"write_file"}, Runtimes: gemini, Kind: KindWrite, Writes: []string{fieldFilePath}},
	{Names: []string{"replace"}, Runtimes: gemini, Kind: KindWrite, Reads: []string{fieldFilePath}, Writes: []string{fieldFilePath}},
	{Names: []string{"google_web_search"}, Runtimes: gemini, Kind: KindFetch},
	// Its enter_plan_mode and exit_plan_mode are EnterPlanMode's and ExitPlanMode's row, folded.
	{Names: []string{
		"write_todos", "ask_user", "activate_skill",
		"update_topic", "complete_task", "invoke_agent", "get_internal_docs", "tracker_create_task",
		"tracker_update_task", "tracker_get_task", "tracker_list_tasks", "tracker_add_dependency",
		"tracker_visualize", "list_background_processes", "read_background_output",
	}, Runtimes: gemini, Kind: KindOther},
}

// shapeIndex maps each folded name of the table to its row, and each name as the table spells
// it too, so the names runtimes send are found without folding.
var shapeIndex = func() map[string]*ToolShape {
	m := map[string]*ToolShape{}
	for i := range toolShapes {
		for _, n := range toolShapes[i].Names {
			m[toolname.Normalize(n)] = &toolShapes[i]
			m[n] = &toolShapes[i]
		}
	}
	return m
}()

// shapeOf is the row of a canonical tool name, or nil.
func shapeOf(tool string) *ToolShape {
	if s, ok := shapeIndex[tool]; ok {
		return s
	}
	return shapeIndex[toolname.Normalize(tool)]
}
