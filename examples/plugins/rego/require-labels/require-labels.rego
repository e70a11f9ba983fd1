# require-labels: Gatekeeper's k8srequiredlabels template's Rego, with only its package
# line changed, as a wasmplane validate plugin. Its parameters come from the plugin's
# config: {"parameters": {"labels": ["team"]}} denies objects without a "team" label.
package k8srequiredlabels

import rego.v1

get_message(parameters, _default) := _default if {
	not parameters.message
}

get_message(parameters, _) := parameters.message

violation contains {"msg": msg, "details": {"missing_labels": missing}} if {
	provided := {label | input.review.object.metadata.labels[label]}
	required := {label | label := input.parameters.labels[_]}
	missing := required - provided
	count(missing) > 0
	def_msg := sprintf("you must provide labels: %v", [missing])
	msg := get_message(input.parameters, def_msg)
}
