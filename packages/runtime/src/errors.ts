// The one error base and Result live in @holdfast/events, which every package depends on.
export { BaseError, Err, errorMessage, Ok, type Result } from '@holdfast/events';
