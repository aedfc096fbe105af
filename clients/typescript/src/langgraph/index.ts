export { MnemosyneSaver, type MnemosyneSaverOptions } from "./saver.js";
export { threadBranch, segment } from "./names.js";
