package build

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hwk-dev/hwk/drivers"
	"github.com/hwk-dev/hwk/internal/nodeimage/winimage"
	"github.com/hwk-dev/hwk/pkg/nodeimage"
)

// install writes the build disk and runs the install VM.
func (wb *windowsBuilder) install(ctx context.Context, m *nodeimage.Manifest) error {
	password, err := winimage.NewPassword()
	if err != nil {
		return err
	}
	in := winimage.BuildInputs{
		// The language is the edition's: Setup stops to ask when the
		// answer file names one the media lacks.
		Unattend:          winimage.UnattendOptions{Version: wb.w.Version, Edition: wb.edition.Name, AdminPassword: password, Locale: wb.edition.Language},
		KubernetesVersion: wb.w.KubernetesVersion,
		ContainerdVersion: wb.recipe.component("containerd").Version,
		HwkSeed:           filepath.Join(wb.w.Programs, "hwk-seed.exe"),
		HwkKubelet:        filepath.Join(wb.w.Programs, "hwk-kubelet.exe"),
		Updates:           wb.updates,
	}
	for key, p := range wb.bins {
		switch {
		case strings.HasPrefix(key, "kubernetes/"):
			in.Kubernetes = append(in.Kubernetes, p)
		case strings.HasPrefix(key, "containerd/"), strings.HasPrefix(key, "hcsshim/"):
			in.Containerd = append(in.Containerd, p)
		case key == "crictl/crictl.exe":
			in.Crictl = p
		}
	}
	slices.Sort(in.Kubernetes)
	slices.Sort(in.Containerd)
	for i, im := range wb.pulled {
		in.Images = append(in.Images, im.Path)
		if wb.images[i].Sandbox {
			in.PauseImage = im.Ref
		}
	}
	if wb.w.OpenSSH != "" {
		dir := filepath.Join(wb.work, "openssh")
		if err := unzipOpenSSH(wb.w.OpenSSH, dir); err != nil {
			return fmt.Errorf("--openssh %s: %w", wb.w.OpenSSH, err)
		}
		in.OpenSSHDir = dir
	}
	disk := filepath.Join(wb.work, "build.iso")
	if err := wb.step("Write the build disk", func() error { return winimage.BuildDisk(disk, in) }); err != nil {
		return err
	}
	m.Windows = &nodeimage.Windows{Version: wb.w.Version, Edition: wb.edition.Name, Build: wb.edition.Build, ISOSHA256: wb.isoSum, Locale: in.Unattend.Locale, AdminPassword: password}

	console := filepath.Join(wb.dir, "install-console.log")
	// A retry of the same build has the same directory: an earlier
	// attempt's log (some drivers append to it) would be read as this
	// one's, its FAILED line winning over this one's done. It is kept
	// beside, as the last attempt's.
	if err := os.Rename(console, console+".prev"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("keep the last attempt's console log: %w", err)
	}
	spec := drivers.InstallSpec{
		Name:        "hwk-build-" + wb.keys["node"][:10],
		Media:       []string{wb.w.ISO, disk},
		PressKey:    true,
		Disk:        filepath.Join(wb.work, "disk."+wb.w.Installer.InstallFormat()),
		DiskBytes:   wb.w.DiskSize,
		CPUs:        wb.w.CPUs,
		MemoryBytes: wb.w.MemoryBytes,
		ConsoleLog:  console,
	}
	label := fmt.Sprintf("Install Windows Server %s (%s) in a %s VM", wb.w.Version, wb.edition.Name, wb.w.DriverName)
	return wb.step(label, func() error {
		ictx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		dog := newWatchdog(wb.w.Budgets, console, spec.Name, wb.w.DriverName, cancel)
		stop := wb.follow(console, dog.saw)
		err := wb.w.Installer.Install(ictx, spec)
		stop()
		dog.stop()
		var stalled *stalledError
		if errors.As(context.Cause(ictx), &stalled) {
			return stalled
		}
		if err != nil {
			return err
		}
		facts, err := provisionResult(console)
		if err != nil {
			return err
		}
		m.Windows.UBR, m.Windows.Updates = facts.ubr, facts.updates
		return nil
	})
}

// follow passes the guest's progress lines from its console log to the
// build log and Progress as they appear; the returned func stops it
// after a last read.
func (wb *windowsBuilder) follow(console string, saw func(string)) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var off int64
		var part string
		read := func() {
			f, err := os.Open(console)
			if err != nil {
				return
			}
			defer f.Close()
			if st, err := f.Stat(); err == nil && st.Size() < off {
				off = 0 // the log was started again
			}
			data, err := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
			if err != nil {
				return
			}
			off += int64(len(data))
			lines := strings.Split(part+string(data), "\n")
			part = lines[len(lines)-1]
			for _, l := range lines[:len(lines)-1] {
				l = strings.TrimSpace(l)
				if strings.HasPrefix(l, progressPrefix) {
					fmt.Fprintln(wb.opts.Log, l)
					wb.w.Progress(strings.TrimPrefix(l, progressPrefix))
					saw(strings.TrimPrefix(l, progressPrefix))
				}
			}
		}
		for {
			select {
			case <-done:
				read()
				return
			case <-time.After(time.Second):
				read()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// progressPrefix starts every line provision.ps1 writes to COM1.
const progressPrefix = "hwk-provision: "

// provisionFacts are what provision.ps1 reports of the Windows it made.
type provisionFacts struct {
	// ubr is the revision of the build phase 2 ran on (after the
	// updates); 0 when the console did not say.
	ubr int
	// updates are the updates installed, by name, in order.
	updates []string
}

// The console lines the facts come from (provision.ps1's Say lines).
var (
	buildLineRE  = regexp.MustCompile(`^phase 2: Windows Server \S+ build (\d+)\.(\d+),`)
	updateLineRE = regexp.MustCompile(`^phase 1: update (\S+) installed`)
)

// provisionResult reads how provisioning ended from the console log, and
// the facts it reported: the guest powers off after a failure too,
// having said why.
func provisionResult(console string) (provisionFacts, error) {
	var facts provisionFacts
	f, err := os.Open(console)
	if err != nil {
		return facts, fmt.Errorf("the install VM's console log: %w", err)
	}
	defer f.Close()
	var last, failed string
	ok := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		rest, found := strings.CutPrefix(l, progressPrefix)
		if !found {
			continue
		}
		last = rest
		if b := buildLineRE.FindStringSubmatch(rest); b != nil {
			facts.ubr, _ = strconv.Atoi(b[2])
		}
		if u := updateLineRE.FindStringSubmatch(rest); u != nil && !slices.Contains(facts.updates, u[1]) {
			facts.updates = append(facts.updates, u[1])
		}
		switch {
		case strings.HasPrefix(rest, "FAILED:"):
			failed = rest
		case strings.HasPrefix(rest, "done:"):
			ok = true
		}
	}
	switch {
	case failed != "":
		return facts, fmt.Errorf("provisioning in the guest %s\n  (console: %s; the guest's full log is C:\\hwk-provision.log on the disk)", failed, console)
	case !ok && last == "":
		return facts, fmt.Errorf("the install VM powered off without provisioning: Windows Setup never ran provision.ps1 (wrong edition or answer file?); console: %s", console)
	case !ok:
		return facts, fmt.Errorf("the install VM powered off before provisioning finished; its last step was %q (console: %s)", last, console)
	}
	return facts, nil
}
