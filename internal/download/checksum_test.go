package download

import (
	"strings"
	"testing"
)

var (
	hexA   = strings.Repeat("a1", 32) // a sha256-length digest
	hexB   = strings.Repeat("b2", 32)
	hexC   = strings.Repeat("c3", 32)
	hex512 = strings.Repeat("d4", 64)
)

func TestParseChecksumFile(t *testing.T) {
	runc := hexA + "  runc.amd64\n" + hexB + "  runc.arm64\n" + hexC + "  libseccomp-2.5.5.tar.gz\n"
	tests := []struct {
		desc, data, algo, name string
		want                   string // digest, if no error is expected
		wantErr                string // part of the error
	}{
		{desc: "bare digest, dl.k8s.io", data: hexA + "\n", algo: "sha256", name: "kubeadm", want: hexA},
		{desc: "bare digest without newline", data: hexA, algo: "sha256", name: "kubeadm", want: hexA},
		{desc: "bare sha512", data: hex512 + "\n", algo: "sha512", name: "x.tgz", want: hex512},
		{desc: "CNI hex  filename sha512", data: hex512 + "  cni-plugins-linux-amd64-v1.6.2.tgz\n", algo: "sha512", name: "cni-plugins-linux-amd64-v1.6.2.tgz", want: hex512},
		{desc: "sha256sum text mode", data: hexB + "  containerd-2.1.0-linux-amd64.tar.gz\n", algo: "sha256", name: "containerd-2.1.0-linux-amd64.tar.gz", want: hexB},
		{desc: "sha256sum binary mode", data: hexB + " *containerd-2.1.0-linux-amd64.tar.gz\n", algo: "sha256", name: "containerd-2.1.0-linux-amd64.tar.gz", want: hexB},
		{desc: "tab separator", data: hexB + "\tx.tar.gz\n", algo: "sha256", name: "x.tar.gz", want: hexB},
		{desc: "runc multi-entry, middle", data: runc, algo: "sha256", name: "runc.arm64", want: hexB},
		{desc: "runc multi-entry, last", data: runc, algo: "sha256", name: "libseccomp-2.5.5.tar.gz", want: hexC},
		{desc: "dot-slash path", data: hexA + "  ./bin/crictl\n" + hexB + "  ./bin/critest\n", algo: "sha256", name: "critest", want: hexB},
		{desc: "dir path, binary mode", data: hexC + " *dist/nerdctl\n", algo: "sha256", name: "nerdctl", want: hexC},
		{desc: "CRLF, comments and blank lines", data: "# sums\r\n\r\n" + hexA + "  a\r\n" + hexC + "  c\r\n", algo: "sha256", name: "c", want: hexC},
		{desc: "uppercase hex normalised", data: strings.ToUpper(hexA) + "  x\n", algo: "sha256", name: "x", want: hexA},
		{desc: "same digest listed twice", data: hexA + "  x\n" + hexA + "  dist/x\n", algo: "sha256", name: "x", want: hexA},

		{desc: "missing entry", data: runc, algo: "sha256", name: "runc.riscv64",
			wantErr: `no entry for "runc.riscv64" in runc.sha256sum (entries: runc.amd64, runc.arm64, libseccomp-2.5.5.tar.gz)`},
		{desc: "single entry for another file", data: hexA + "  runc.amd64\n", algo: "sha256", name: "runc.arm64",
			wantErr: `no entry for "runc.arm64" in runc.sha256sum (entries: runc.amd64)`},
		{desc: "sha256 digest for sha512", data: hexA + "\n", algo: "sha512", name: "x",
			wantErr: "runc.sha256sum line 1: sha512 digest \"" + hexA + "\" has 64 hex digits, want 128"},
		{desc: "sha512 digest for sha256", data: hexA + "  a\n" + hex512 + "  b\n", algo: "sha256", name: "b",
			wantErr: "line 2: sha256 digest \"" + hex512 + "\" has 128 hex digits, want 64"},
		{desc: "not hex", data: strings.Repeat("zz", 32) + "  x\n", algo: "sha256", name: "x", wantErr: "is not hex"},
		{desc: "empty", data: "\n# nothing\n", algo: "sha256", name: "x", wantErr: "runc.sha256sum is empty"},
		{desc: "bare digest among entries", data: hexA + "\n" + hexB + "  x\n", algo: "sha256", name: "x",
			wantErr: "line 1: digest without a file name"},
		{desc: "conflicting entries", data: hexA + "  x\n" + hexB + "  ./x\n", algo: "sha256", name: "x",
			wantErr: `conflicting entries for "x" on lines 1 and 2`},
		{desc: "unknown algorithm", data: hexA, algo: "md5", name: "x", wantErr: `unsupported checksum algorithm "md5"`},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, err := parseChecksumFile([]byte(tt.data), tt.algo, tt.name, "runc.sha256sum")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := (Checksum{Algo: tt.algo, Hex: tt.want}); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestParseChecksumFileListsAtMostEightEntries(t *testing.T) {
	var data strings.Builder
	for _, n := range "abcdefghij" {
		data.WriteString(hexA + "  " + string(n) + "\n")
	}
	_, err := ParseChecksumFile([]byte(data.String()), "sha256", "z")
	want := `no entry for "z" in checksum file (entries: a, b, c, d, e, f, g, h, ...)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestChecksumString(t *testing.T) {
	if got, want := (Checksum{Algo: "sha256", Hex: hexA}).String(), "sha256:"+hexA; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAlgoFromName(t *testing.T) {
	for name, want := range map[string]string{
		"kubeadm.sha256": "sha256", "runc.sha256sum": "sha256",
		"x.tgz.sha512": "sha512", "x.sha512sum": "sha512",
		"SHA256SUMS": "", "x.md5": "", "sha256": "",
	} {
		got, err := algoFromName(name)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("algoFromName(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
}
