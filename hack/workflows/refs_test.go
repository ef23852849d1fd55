package workflows

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// stepOutputRE finds steps.ID.outputs.NAME (and the ['NAME'] form) in a
// workflow's expressions.
var stepOutputRE = regexp.MustCompile(`steps\.([A-Za-z_][A-Za-z0-9_-]*)\.outputs(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[\s*'([^']+)'\s*\])`)

// CheckOutputs fails for every step output a job of the workflow reads
// (in its steps or its own outputs) from a step that ran and succeeded
// but never set it. GitHub evaluates such a reference to an empty string
// and goes on, and so does act; actionlint cannot know what a run step
// sets. An empty version, digest or kubeconfig path then fails far from
// its cause, or worse, not at all.
func (r *Repo) CheckOutputs(path string, res *Result) error {
	wf, err := r.readWorkflow(path)
	if err != nil {
		return err
	}
	var problems []string
	for _, jobID := range slices.Sorted(maps.Keys(wf.Jobs)) {
		job := wf.Jobs[jobID]
		var texts []string
		for _, v := range job.Outputs {
			texts = append(texts, v)
		}
		for _, s := range job.Steps {
			texts = append(texts, s.Run, s.If, s.Name)
			for _, v := range s.With {
				texts = append(texts, v)
			}
			for _, v := range s.Env {
				texts = append(texts, v)
			}
		}
		for _, text := range texts {
			for _, m := range stepOutputRE.FindAllStringSubmatch(text, -1) {
				id, name := m[1], m[2]
				if name == "" {
					name = m[3]
				}
				if !res.stepSucceeded(jobID, id) {
					continue
				}
				if _, ok := res.Outputs[jobID][id][name]; !ok {
					set := slices.Sorted(maps.Keys(res.Outputs[jobID][id]))
					problems = append(problems, fmt.Sprintf("job %s reads steps.%s.outputs.%s, which step %s never set (it set: %s)",
						jobID, id, name, id, strings.Join(set, ", ")))
				}
			}
		}
	}
	slices.Sort(problems)
	problems = slices.Compact(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", path, strings.Join(problems, "; "))
	}
	return nil
}

// stepSucceeded says whether a step with this ID ran to success in the
// job (any of a matrix job's runs).
func (res *Result) stepSucceeded(jobID, stepID string) bool {
	for _, s := range res.Steps {
		if (s.Job == jobID || strings.HasPrefix(s.Job, jobID+" (")) && s.ID == stepID && s.Stage == "Main" && s.Result == "success" {
			return true
		}
	}
	return false
}
