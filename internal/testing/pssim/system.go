package pssim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

func (m *Machine) getCommand(c *call) (any, error) {
	if strings.EqualFold(c.Str("Name"), "Add-MpPreference") && m.Defender {
		return newObject("CmdletInfo", "Name", "Add-MpPreference", "ModuleName", "ConfigDefender"), nil
	}
	return nil, nonTerminating{fmt.Sprintf("The term '%s' is not recognized as the name of a cmdlet.", c.Str("Name"))}
}

func (m *Machine) getVolume(c *call) (any, error) {
	for _, letter := range slices.Sorted(maps.Keys(m.volumes)) {
		if strings.EqualFold(m.volumes[letter], c.Str("FileSystemLabel")) || (c.Has("DriveLetter") && strings.EqualFold(c.Str("DriveLetter"), letter)) {
			return newObject("Volume", "DriveLetter", letter, "FileSystemLabel", m.volumes[letter]), nil
		}
	}
	return nil, nonTerminating{fmt.Sprintf("No MSFT_Volume objects found with property 'FileSystemLabel' equal to '%s'.", c.Str("FileSystemLabel"))}
}

func (m *Machine) getPartition(c *call) (any, error) {
	if !strings.EqualFold(c.Str("DriveLetter"), "C") {
		return nil, nonTerminating{"No MSFT_Partition objects found."}
	}
	return newObject("Partition", "DriveLetter", "C", "DiskNumber", 0, "PartitionNumber", 4, "Size", int(m.PartitionBytes)), nil
}

func (m *Machine) resizePartition(c *call) (any, error) {
	size := int64(toInt(c.Arg("Size")))
	if size > m.DiskBytes-600<<20 {
		return nil, winErr("Size Not Supported")
	}
	if size == m.PartitionBytes {
		return nil, winErr("The size of the extent is less than the minimum of 1MB.")
	}
	m.PartitionBytes = size
	return nil, nil
}

func (m *Machine) getNetAdapter(c *call) (any, error) {
	var out []any
	for i, st := range m.Adapters {
		out = append(out, newObject("NetAdapter", "Name", fmt.Sprintf("Ethernet %d", i+1), "ifIndex", 6+i, "Status", st))
	}
	return unwrap(out), nil
}

func (m *Machine) registerTask(c *call) (any, error) {
	name := c.Str("TaskName")
	if _, ok := m.Tasks[strings.ToLower(name)]; ok && !c.Switch("Force") {
		return nil, winErr("Cannot create a file when that file already exists.")
	}
	act, _ := c.Arg("Action").(*Object)
	trig, _ := c.Arg("Trigger").(*Object)
	if act == nil || trig == nil {
		return nil, winErr("Register-ScheduledTask: the model wants -Action and -Trigger")
	}
	set, _ := c.Arg("Settings").(*Object)
	if set == nil {
		set = newSettings(&call{named: map[string]any{}})
	}
	t := &Task{
		Name: name, Execute: str(act.Get("Execute")), Argument: str(act.Get("Arguments")), AtStartup: truthy(trig.Get("AtStartup")),
		DisallowStartIfOnBatteries: truthy(set.Get("DisallowStartIfOnBatteries")), StopIfGoingOnBatteries: truthy(set.Get("StopIfGoingOnBatteries")),
		RunOnlyIfIdle: truthy(set.Get("RunOnlyIfIdle")), RunOnlyIfNetworkAvailable: truthy(set.Get("RunOnlyIfNetworkAvailable")),
		RestartCount: toInt(set.Get("RestartCount")),
	}
	m.Tasks[strings.ToLower(name)] = t
	return newObject("ScheduledTask", "TaskName", name), nil
}

// newSettings is New-ScheduledTaskSettingsSet: Task Scheduler's defaults
// (the task does not start on batteries and stops when the machine goes
// onto them) unless the switches say otherwise.
func newSettings(c *call) *Object {
	return newObject("TaskSettings",
		"DisallowStartIfOnBatteries", !c.Switch("AllowStartIfOnBatteries"),
		"StopIfGoingOnBatteries", !c.Switch("DontStopIfGoingOnBatteries"),
		"RunOnlyIfIdle", c.Switch("RunOnlyIfIdle"),
		"RunOnlyIfNetworkAvailable", c.Switch("RunOnlyIfNetworkAvailable"),
		"RestartCount", toInt(c.Arg("RestartCount")))
}
