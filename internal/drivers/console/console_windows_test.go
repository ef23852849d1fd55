package console

import (
	"os"
	"os/exec"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// TestMain makes the test binary the child the test starts: with
// CONSOLE_CHILD set it waits for its stdin to close.
func TestMain(m *testing.M) {
	if os.Getenv("CONSOLE_CHILD") != "" {
		var b [1]byte
		os.Stdin.Read(b[:])
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDetach puts the test in a job: a detached child starts outside it
// where the job allows breakaway, and its start is Refused where the job
// does not.
func TestDetach(t *testing.T) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	limit := func(flags uint32) {
		var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
		info.BasicLimitInformation.LimitFlags = flags
		if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
			t.Fatalf("SetInformationJobObject: %v", err)
		}
	}
	limit(windows.JOB_OBJECT_LIMIT_BREAKAWAY_OK)
	if err := windows.AssignProcessToJobObject(job, windows.CurrentProcess()); err != nil {
		t.Fatalf("AssignProcessToJobObject: %v", err)
	}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "CONSOLE_CHILD=1")
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		Hide(cmd)
		Detach(cmd)
		return cmd, cmd.Start()
	}
	cmd, err := start()
	if err != nil {
		t.Fatalf("start with breakaway allowed: %v", err)
	}
	defer cmd.Process.Kill()
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_INFORMATION, false, uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(h)
	var in int32
	if r, _, err := isProcessInJob.Call(uintptr(h), uintptr(job), uintptr(unsafe.Pointer(&in))); r == 0 {
		t.Fatalf("IsProcessInJob: %v", err)
	}
	if in != 0 {
		t.Error("the detached child is in hwk's job")
	}

	limit(0)
	if cmd, err := start(); err == nil {
		cmd.Process.Kill()
		t.Error("a job that allows no breakaway let the detached child start")
	} else if !Refused(err) {
		t.Errorf("start = %v, want one Refused reports", err)
	}
}

var isProcessInJob = windows.NewLazySystemDLL("kernel32.dll").NewProc("IsProcessInJob")
