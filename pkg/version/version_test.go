package version

import (
	"runtime"
	"testing"
)

func TestGet(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.2.3", "deadbeef"
	got := Get()
	want := Info{Version: "v1.2.3", Commit: "deadbeef", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if got != want {
		t.Errorf("Get() = %+v, want %+v", got, want)
	}
	Commit = ""
	if Get().Commit == "" {
		t.Error("no commit from the linker must still say something")
	}
}
