# docs/fidelity.md's list of its sections: the ones `scripts/fidelity.sh
# --doc-section NAME` wrote (between its markers), each with the summary
# line of its own runs, put after the head's summary table between markers of
# their own, in place of the list written before. The file is read twice:
#
#   awk -f scripts/lib/fidelity-sections.awk docs/fidelity.md docs/fidelity.md
#
# The head's figures count only the head's runs: a section's runs, timings
# and cluster are its own.
BEGIN {
    begin_list = "<!-- fidelity.sh sections -->"
    end_list = "<!-- end of sections -->"
    section_prefix = "<!-- fidelity.sh --doc-section "
}

# First pass: each section's name and first bold line (its summary).
NR == FNR {
    if (index($0, section_prefix) == 1) {
        name = substr($0, length(section_prefix) + 1)
        sub(/: generated, do not edit -->$/, "", name)
        names[++n] = name
        inside = 1
    } else if (inside && index($0, "<!-- end of section ") == 1) {
        inside = 0
    } else if (inside && !(n in summary) && substr($0, 1, 2) == "**") {
        summary[n] = $0
    }
    next
}

# Second pass: the document without the old list, the new one after the
# head's summary table (the first table after `## Summary`).
$0 == begin_list { skipping = 1; next }
skipping {
    if ($0 == end_list) { skipping = 0; dropped_list = 1 }
    next
}
# The blank line that followed the old list.
dropped_list { dropped_list = 0; if ($0 == "") next }
in_table && substr($0, 1, 1) != "|" { in_table = 0; placed = 1; list() }
{ print }
/^## Summary$/ && !placed { in_summary = 1 }
in_summary && substr($0, 1, 1) == "|" { in_summary = 0; in_table = 1 }

function list(    i, anchor) {
    if (n == 0) return
    print ""
    print begin_list
    print "Sections at the end were generated on their own (`scripts/fidelity.sh --doc-section NAME`), each from runs, timings and a cluster of its own; the figures above do not count them:"
    print ""
    for (i = 1; i <= n; i++) {
        anchor = tolower(names[i])
        gsub(/ /, "-", anchor)
        print "- [" names[i] "](#" anchor "): " (i in summary ? summary[i] : "(no summary line)")
    }
    print end_list
}
