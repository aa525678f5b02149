const view = Bokeh.index.find_one(tool)
if (view != null) view.doit("save")
