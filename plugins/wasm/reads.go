package wasm

import (
	"fmt"
	"slices"
	"strings"
)

// requestMembers are the members of a validate request (abi.AdmissionRequest): the first
// key of every path a module declares it reads.
func requestMembers() []string {
	return []string{"uid", "kind", "resource", "subResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"}
}

// declaredReads returns the members of validate requests a module's configure answer says
// it reads, or nil for the whole request (no paths). A path is member names joined by
// dots, from the request's root; one that names no request member, or has an empty
// name, is refused: a misspelt path would silently leave out a member the plugin reads.
func declaredReads(paths []string) (*Members, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	keys := make([][]string, 0, len(paths))
	for i, p := range paths {
		path := strings.Split(p, ".")
		if slices.Contains(path, "") {
			return nil, fmt.Errorf("reads[%d] %q: a path is member names joined by dots, none empty", i, p)
		}
		if members := requestMembers(); !slices.Contains(members, path[0]) {
			return nil, fmt.Errorf("reads[%d] %q: %q is not a member of a validate request (%s)", i, p, path[0], strings.Join(members, ", "))
		}
		keys = append(keys, path)
	}
	return MembersOf(keys...), nil
}
