export { MnemosyneSaver, type MnemosyneSaverOptions } from "./saver.js";
export { channelSegment, namespaceSegment, segment, threadBranch } from "./names.js";
