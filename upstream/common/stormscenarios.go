package common

import (
	"fmt"
	"testing"
)

// stormIn runs one storm in a bubble of its own.
func stormIn(t *testing.T, run StormRun, subject NewSubject) StormReport {
	var r StormReport
	Bubble(t, func(t *testing.T) {
		var err error
		r, err = RunStorm(run, subject)
		if err != nil {
			t.Fatal(err)
		}
	})
	return r
}

const stormHow = "in a synctest bubble (virtual clock): the object default/controlloop-burst at value 0 on %s; the controller reconciles it once; then the writes (Update of data.value = 1..N, each after synctest.Wait, so a reconcile ending at the instant of a write reads the cache first); then until every event is in and nothing is queued or running, held for cost + 2 ms. 'events heard' and 'keys queued' count the handler's calls and adds after the initial reconcile"

// StormScenarios are chapter 06's storms on subject: the essay's storm, the three sweeps and
// the below-the-gap runs. who names the subject in the headers.
func StormScenarios(prefix, who string, subject NewSubject) []Scenario {
	how := who + ", " + fmt.Sprintf(stormHow, SimpleClientset)
	return []Scenario{
		{prefix + "storm_essay", how, func(t *testing.T, w *Writer) {
			r := stormIn(t, StormRun{Storm: Essay, Workers: 1}, subject)
			r.Summary(w.Printf)
		}},
		{prefix + "storm_sweeps", how + "; one bubble per row", func(t *testing.T, w *Writer) {
			names, runs := Sweeps()
			for i, name := range names {
				if i > 0 {
					w.Printf("")
				}
				w.Printf("%s", name)
				TableHeader(w.Printf)
				for _, run := range runs[i] {
					stormIn(t, run, subject).Row(w.Printf)
				}
			}
		}},
	}
}

// GapZeroScenarios: the gap-0 storm on both fakes, with the informer caught up before each
// write.
func GapZeroScenarios(prefix, who string, subject NewSubject) []Scenario {
	how := who + ", gap 0: " + fmt.Sprintf(stormHow, "each fake") + ". (What the fakes do when a watch is not read: the method file.) Back to back (no synctest.Wait between writes) the result depends on how the two Ps interleave the writer and the informer, so it is not recorded: see upstream/README.md"
	return []Scenario{{prefix + "storm_gap0_fakes", how, func(t *testing.T, w *Writer) {
		for _, run := range GapZeroRuns() {
			if run.BackToBack {
				continue
			}
			w.Printf("%s:", run.Fake)
			r := stormIn(t, run, subject)
			r.Summary(func(format string, args ...any) { w.Printf("  "+format, args...) })
		}
	}}}
}
