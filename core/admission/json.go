package admission

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
)

func jsonMarshal(obj runtime.Object) ([]byte, error) { return json.Marshal(obj) }
