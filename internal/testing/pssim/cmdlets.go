package pssim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

func (m *Machine) runCmdlet(c *call) (any, error) {
	name := strings.ToLower(c.Name)
	m.Log = append(m.Log, c.Name)
	mod, verb, ok := strings.Cut(name, `\`)
	if !ok {
		verb, mod = name, ""
	}
	fn, ok := cmdlets[verb]
	if !ok || (mod != "" && !strings.EqualFold(fn.module, mod) && !(verb == "add-mppreference" && mod == "defender")) {
		return nil, fmt.Errorf("pssim: the model has no command %s", c.Name)
	}
	return fn.run(m, c)
}

type cmdlet struct {
	module string
	run    func(m *Machine, c *call) (any, error)
}

var cmdlets map[string]cmdlet

func init() {
	mgmt, util, core := "microsoft.powershell.management", "microsoft.powershell.utility", "microsoft.powershell.core"
	none := func(*Machine, *call) (any, error) { return nil, nil }
	cmdlets = map[string]cmdlet{
		"new-item":            {mgmt, (*Machine).newItem},
		"new-itemproperty":    {mgmt, (*Machine).newItemProperty},
		"remove-itemproperty": {mgmt, (*Machine).removeItemProperty},
		"get-itemproperty":    {mgmt, (*Machine).getItemProperty},
		"copy-item":           {mgmt, (*Machine).copyItem},
		"set-content":         {mgmt, (*Machine).setContent},
		"get-content":         {mgmt, (*Machine).getContent},
		"remove-item":         {mgmt, (*Machine).removeItem},
		"test-path":           {mgmt, (*Machine).testPath},
		"join-path":           {mgmt, func(_ *Machine, c *call) (any, error) { return join(str(c.Pos(0)), str(c.Pos(1))), nil }},
		"split-path": {mgmt, func(_ *Machine, c *call) (any, error) {
			p := str(c.Pos(0))
			if c.Has("Path") {
				p = c.Str("Path")
			}
			if c.Switch("Leaf") {
				return base(p), nil
			}
			return parent(p), nil
		}},
		"get-childitem":    {mgmt, (*Machine).getChildItem},
		"get-item":         {mgmt, (*Machine).getItem},
		"get-service":      {mgmt, (*Machine).getService},
		"set-service":      {mgmt, (*Machine).setService},
		"start-service":    {mgmt, (*Machine).startService},
		"restart-service":  {mgmt, (*Machine).restartService},
		"stop-service":     {mgmt, (*Machine).stopService},
		"restart-computer": {mgmt, func(m *Machine, _ *call) (any, error) { return nil, m.halt("restart") }},
		"stop-computer":    {mgmt, func(m *Machine, _ *call) (any, error) { return nil, m.halt("poweroff") }},
		"rename-computer": {mgmt, func(m *Machine, c *call) (any, error) {
			m.Env["pendingcomputername"] = c.Str("NewName")
			return nil, nil
		}},
		"start-process":    {mgmt, (*Machine).startProcess},
		"write-output":     {util, func(_ *Machine, c *call) (any, error) { return unwrap(append(c.input, c.pos...)), nil }},
		"out-string":       {util, func(_ *Machine, c *call) (any, error) { return outString(c.input), nil }},
		"convertfrom-json": {util, convertFromJSON},
		"select-object":    {util, selectObject},
		"new-object":       {util, (*Machine).newObject},
		"start-sleep":      {util, none},
		"new-timespan": {util, func(_ *Machine, c *call) (any, error) {
			return newObject("TimeSpan", "Minutes", c.Arg("Minutes"), "Hours", c.Arg("Hours")), nil
		}},
		"out-null":         {core, none},
		"where-object":     {core, whereObject},
		"foreach-object":   {core, forEachObject},
		"get-command":      {core, (*Machine).getCommand},
		"start-transcript": {"microsoft.powershell.host", none},
		"stop-transcript":  {"microsoft.powershell.host", none},
		"get-volume":       {"storage", (*Machine).getVolume},
		"get-partition":    {"storage", (*Machine).getPartition},
		"resize-partition": {"storage", (*Machine).resizePartition},
		"update-disk":      {"storage", none},
		"get-partitionsupportedsize": {"storage", func(m *Machine, c *call) (any, error) {
			return newObject("PartitionSupportedSize", "SizeMin", 8<<30, "SizeMax", int(m.DiskBytes-600<<20)), nil
		}},
		"register-scheduledtask": {"scheduledtasks", (*Machine).registerTask},
		"unregister-scheduledtask": {"scheduledtasks", func(m *Machine, c *call) (any, error) {
			delete(m.Tasks, strings.ToLower(c.Str("TaskName")))
			return nil, nil
		}},
		"new-scheduledtaskaction": {"scheduledtasks", func(_ *Machine, c *call) (any, error) {
			return newObject("Action", "Execute", c.Str("Execute"), "Arguments", c.Str("Argument")), nil
		}},
		"new-scheduledtasktrigger": {"scheduledtasks", func(_ *Machine, c *call) (any, error) {
			return newObject("Trigger", "AtStartup", c.Switch("AtStartup")), nil
		}},
		"new-scheduledtasksettingsset": {"scheduledtasks", func(_ *Machine, c *call) (any, error) { return newSettings(c), nil }},
		"enable-windowsoptionalfeature": {"dism", func(m *Machine, c *call) (any, error) {
			m.changeFeature(true, c.Str("FeatureName"))
			return nil, nil
		}},
		"new-netfirewallrule":        {"netsecurity", (*Machine).newFirewallRule},
		"get-netfirewallrule":        {"netsecurity", (*Machine).getFirewallRule},
		"set-netfirewallrule":        {"netsecurity", (*Machine).setFirewallRule},
		"get-netadapter":             {"netadapter", (*Machine).getNetAdapter},
		"set-netipinterface":         {"nettcpip", none},
		"get-netipaddress":           {"nettcpip", none},
		"remove-netipaddress":        {"nettcpip", none},
		"get-netroute":               {"nettcpip", none},
		"remove-netroute":            {"nettcpip", none},
		"new-netipaddress":           {"nettcpip", none},
		"set-dnsclientserveraddress": {"dnsclient", none},
		"add-mppreference": {"configdefender", func(m *Machine, _ *call) (any, error) {
			if !m.Defender {
				return nil, winErr("Add-MpPreference: Defender is not installed")
			}
			if m.DefenderStarting > 0 {
				m.DefenderStarting--
				return nil, winErr("Operation failed with the following error: 0x800106ba")
			}
			return nil, nil
		}},
	}
}

func outString(in []any) string {
	var b strings.Builder
	for _, x := range in {
		b.WriteString(str(x))
		b.WriteString("\r\n")
	}
	return b.String()
}

func convertFromJSON(_ *Machine, c *call) (any, error) {
	var v any
	if err := json.Unmarshal([]byte(str(unwrap(c.input))), &v); err != nil {
		return nil, winErr("ConvertFrom-Json: %v", err)
	}
	return fromJSON(v), nil
}

func fromJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		o := newObject("PSCustomObject")
		for k, e := range x {
			o.set(k, fromJSON(e))
		}
		return o
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromJSON(e)
		}
		return out
	case float64:
		return int(x)
	}
	return v
}

func selectObject(_ *Machine, c *call) (any, error) {
	if c.Has("First") {
		n := toInt(c.Arg("First"))
		if n < len(c.input) {
			return unwrap(c.input[:n]), nil
		}
		return unwrap(c.input), nil
	}
	return nil, errors.New("pssim: Select-Object without -First")
}

// whereObject supports "Where-Object Prop -op value" and a script block.
func whereObject(m *Machine, c *call) (any, error) {
	var out []any
	for _, item := range c.input {
		keep := false
		if sb, ok := c.Pos(0).(scriptBlock); ok {
			v, err := c.in.withItem(sb, item, c.sc)
			if err != nil {
				return nil, err
			}
			keep = truthy(v)
		} else {
			prop := str(c.Pos(0))
			var op string
			for k := range c.named {
				if k != "erroraction" {
					op = k
				}
			}
			v, err := c.in.binary("-"+op, property(item, prop), c.named[op])
			if err != nil {
				return nil, err
			}
			keep = truthy(v)
		}
		if keep {
			out = append(out, item)
		}
	}
	return unwrap(out), nil
}

func forEachObject(m *Machine, c *call) (any, error) {
	sb, ok := c.Pos(0).(scriptBlock)
	if !ok {
		return nil, errors.New("pssim: ForEach-Object without a script block")
	}
	var out []any
	for _, item := range c.input {
		v, err := c.in.withItem(sb, item, c.sc)
		if err != nil {
			return nil, err
		}
		out = append(out, asList(v)...)
	}
	return unwrap(out), nil
}

// withItem runs a script block with $_ set to item.
func (in *interp) withItem(sb scriptBlock, item any, parent *scope) (any, error) {
	body, err := parse(sb.src)
	if err != nil {
		return nil, in.fail("pssim: %v", err)
	}
	sc := newScope(parent)
	sc.set("_", item)
	out, err := in.runBlock(body, sc)
	return unwrap(out), err
}
