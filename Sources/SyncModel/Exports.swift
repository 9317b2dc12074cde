// `TypedRawValue`, which the model's IDs and offsets conform to, for every module that imports
// the model.
@_exported import TypedValues
