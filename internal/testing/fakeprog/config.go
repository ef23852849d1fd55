package fakeprog

// Protocol is how the fake program is asked: one call per process, or a
// session that reads requests from stdin.
type Protocol string

const (
	// Calls: each process is one request, its arguments (what it reads on
	// stdin is kept for the test), answered with a reply's stdout, stderr
	// and exit status (VBoxManage, wsl.exe, powershell.exe -EncodedCommand).
	Calls Protocol = "calls"
	// PowerShellSession: the process is the Hyper-V driver's PowerShell
	// session (internal/drivers/hyperv/powershell.go): started with -Command -, it
	// reads a setup line and a ready check (answered with its marker
	// line), then one request per line, a base64 script that
	// hyperv.Wrap wrapped, and answers each with a framed result line
	// whose out is a reply's JSON or whose error is an exchange's error
	// record.
	PowerShellSession Protocol = "powershell-session"
)

// Config is what the fake program is told, kept in its directory as
// config.json.
type Config struct {
	// Program is its name on PATH ("VBoxManage", "wsl.exe",
	// "powershell.exe"); on Windows a name with no extension is
	// installed with ".exe" (VBoxManage.exe), as the real tool is.
	Program    string      `json:"program"`
	Protocol   Protocol    `json:"protocol"`
	Transcript *Transcript `json:"transcript"`
	// Replies is the directory of reply files ("" for none).
	Replies string `json:"replies"`
	// Vars fill the transcript's ${VAR}s.
	Vars map[string]string `json:"vars"`
	// Refusal is how a call no exchange expects is answered (Calls), as
	// the real program answers a failure; "{why}" in its text is the
	// reason. A session answers with an error record.
	Refusal Reply `json:"refusal"`
	// Silent makes a session read its stdin to the end and answer
	// nothing, as Wine's powershell.exe does (a stub that reads the
	// commands of -Command - and prints nothing: wine
	// programs/powershell/main.c).
	Silent bool `json:"silent"`
	// ANSI has replies other than UTF-16LE ones written in the ANSI code
	// page on Windows, as VBoxManage writes to a pipe (VirtualBox's IPRT,
	// r3/stream.cpp: RTStrUtf8ToCurrentCP); elsewhere they stay UTF-8.
	ANSI bool `json:"ansi"`
}

// The files of the fake's directory.
const (
	// The directory above the program's holds config.json, state.json,
	// and the record.
	configFile = "config.json"
	stateFile  = "state.json"
	// callsFile has the arguments of every process started, a JSON array
	// a line; stdin.N what call N read on stdin.
	callsFile = "calls.log"
	// requestsFile has every request, headed "# --- " and the exchange
	// that answered it (or "unexpected").
	requestsFile = "requests.log"
	// answersFile has the exchange that answered each request, a line
	// each.
	answersFile    = "answers.log"
	unexpectedFile = "unexpected.log"
	lockFile       = "lock"
)
