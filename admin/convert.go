package admin

// The generic parts of the conversions to the API's documents. Each keeps
// a nil input nil, so that a document says null where the record did.

// convertSlice converts every element of in with f.
func convertSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, x := range in {
		out[i] = f(x)
	}
	return out
}

// convertPtr converts *in with f.
func convertPtr[T, U any](in *T, f func(T) U) *U {
	if in == nil {
		return nil
	}
	out := f(*in)
	return &out
}

// stringKeys turns a map keyed by a string type into one keyed by string;
// JSON writes both alike.
func stringKeys[K ~string, V any](in map[K]V) map[string]V {
	if in == nil {
		return nil
	}
	out := make(map[string]V, len(in))
	for k, v := range in {
		out[string(k)] = v
	}
	return out
}
